//! Small pure helpers shared by the rules: CPU lists and masks, sysctl triples,
//! data-IRQ names, interval lengths.

use crate::probe::cpu::CpuSample;
use crate::probe::facts::{HostFacts, IrqFact, NicFacts};
use crate::probe::sample::Sample;
use crate::units::{format_cpu_list, parse_cpu_list, CpuId};

/// A kernel list (`0-3,8`) of CPUs: the inverse of [`cpus`].
pub fn cpu_list(ids: &[u32]) -> String {
    format_cpu_list(&ids.iter().map(|c| CpuId(*c)).collect::<Vec<_>>())
}

/// CPUs of a kernel list (`0-3,8`); empty when unparsable.
pub fn cpus(list: &str) -> Vec<u32> {
    parse_cpu_list(list)
        .map(|v| v.into_iter().map(|c: CpuId| c.0).collect())
        .unwrap_or_default()
}

/// CPUs of a sysfs hex mask (`00000000,0000000f`); empty for `0`. The
/// rules ask only for a mask's one CPU (`one_cpu_of_mask` in the CPU
/// rules); this full list is the tests' reference.
#[cfg(test)]
pub fn mask_cpus(mask: &str) -> Vec<u32> {
    let mut out = Vec::new();
    let mut bit = 0u32;
    for word in mask.trim().rsplit(',') {
        for ch in word.chars().rev() {
            let Some(d) = ch.to_digit(16) else {
                return Vec::new();
            };
            for i in 0..4 {
                if d & (1 << i) != 0 {
                    out.push(bit + i);
                }
            }
            bit += 4;
        }
    }
    out
}

/// Hex mask (sysfs form, no `0x`) of one CPU.
pub fn cpu_mask(cpu: u32) -> String {
    let word = cpu / 32;
    let mut parts = vec![format!("{:08x}", 1u32 << (cpu % 32))];
    for _ in 0..word {
        parts.push("00000000".to_string());
    }
    parts.join(",")
}

/// Hex mask (sysfs form, no `0x`) of several CPUs; `0` for none.
pub fn cpus_mask(cpus: &[u32]) -> String {
    let words = cpus.iter().map(|c| c / 32 + 1).max().unwrap_or(1) as usize;
    let mut w = vec![0u32; words];
    for c in cpus {
        w[(c / 32) as usize] |= 1 << (c % 32);
    }
    w.iter()
        .rev()
        .map(|x| format!("{x:08x}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// Third field of a `min default max` sysctl (`tcp_rmem`), or the single value.
pub fn sysctl_max(facts: &HostFacts, name: &str) -> Option<u64> {
    facts
        .sysctls
        .get(name)
        .and_then(|v| v.split_whitespace().last())
        .and_then(|v| v.parse().ok())
}

/// First two fields of a `min default max` sysctl, for rewriting only the max.
pub fn sysctl_min_default(facts: &HostFacts, name: &str) -> (String, String) {
    let v: Vec<&str> = facts
        .sysctls
        .get(name)
        .map(|v| v.split_whitespace().collect())
        .unwrap_or_default();
    if v.len() == 3 {
        (v[0].to_string(), v[1].to_string())
    } else if name.ends_with("rmem") {
        ("4096".into(), "131072".into())
    } else {
        ("4096".into(), "16384".into())
    }
}

/// Is this IRQ a data (completion / rx / tx) interrupt rather than a control one?
pub fn is_data_irq(irq: &IrqFact) -> bool {
    const CONTROL: [&str; 7] = ["async", "cmd", "ctrl", "config", "misc", "pages", "fw"];
    let n = irq.name.as_str();
    // Names are lower case nearly always: no lowered copy per IRQ then
    // (hundreds per host, several rules each).
    if n.bytes().any(|b| b.is_ascii_uppercase()) {
        let n = n.to_ascii_lowercase();
        !CONTROL.iter().any(|c| n.contains(c))
    } else {
        !CONTROL.iter().any(|c| n.contains(c))
    }
}

/// Data IRQs of a NIC with their effective CPUs.
pub fn data_irqs(nic: &NicFacts) -> Vec<(&IrqFact, Vec<u32>)> {
    nic.irqs
        .iter()
        .filter(|i| is_data_irq(i))
        .map(|i| (i, cpus(&i.affinity)))
        .collect()
}

/// The NIC-local CPUs: `local_cpulist`, else all online CPUs.
pub fn local_cpus(nic: &NicFacts, facts: &HostFacts) -> Vec<u32> {
    let l = nic.local_cpulist.as_deref().map(cpus).unwrap_or_default();
    if l.is_empty() {
        (0..facts.cpus as u32).collect()
    } else {
        l
    }
}

/// Interval length (s).
pub fn secs(s: &Sample) -> f64 {
    (s.end_s - s.start_s).max(0.0)
}

/// Is the driver a virtual one (no PCI device behind it)?
pub fn is_virtual(nic: &NicFacts) -> bool {
    match nic.drvinfo.value() {
        Some(d) => d.bus_info.is_empty() || d.driver == "veth",
        None => nic.pcie.is_none(),
    }
}

/// Driver name, or `?`.
pub fn driver(nic: &NicFacts) -> &str {
    nic.drvinfo
        .value()
        .map(|d| d.driver.as_str())
        .unwrap_or("?")
}

/// Link speed (Mb/s), when known.
pub fn speed_mbps(nic: &NicFacts) -> Option<u32> {
    nic.link.value().and_then(|l| l.speed_mbps)
}

/// Smallest power of two ≥ `v` (at least 1).
pub fn pow2_at_least(v: f64) -> u64 {
    let v = if v.is_finite() && v > 1.0 {
        v as u64
    } else {
        1
    };
    v.checked_next_power_of_two().unwrap_or(u64::MAX)
}

/// Round-robin assignment of `n` items over `cpus` (for affinity fixes).
pub fn spread(n: usize, cpus: &[u32]) -> Vec<u32> {
    if cpus.is_empty() {
        return vec![0; n];
    }
    (0..n).map(|i| cpus[i % cpus.len()]).collect()
}

/// `12.17.1010 (MT_...)` → [12, 17, 1010].
pub fn version_numbers(v: &str) -> Vec<u64> {
    v.split_whitespace()
        .next()
        .unwrap_or("")
        .split(['.', '-'])
        .map_while(|p| p.parse().ok())
        .collect()
}

/// Mean of `f` per core over the samples (warm-up left out).
fn mean_per_core<'a>(
    samples: impl IntoIterator<Item = &'a Sample>,
    f: fn(&crate::probe::cpu::CpuSample) -> f64,
) -> Vec<(u32, f64)> {
    let mut sums: std::collections::BTreeMap<u32, (f64, usize)> = std::collections::BTreeMap::new();
    for s in samples.into_iter().filter(|s| !s.omitted) {
        for c in &s.cpus {
            let e = sums.entry(c.cpu.0).or_default();
            e.0 += f(c);
            e.1 += 1;
        }
    }
    sums.into_iter()
        .map(|(cpu, (sum, n))| (cpu, sum / n.max(1) as f64))
        .collect()
}

/// Mean busy % per core over the samples (warm-up left out).
pub fn mean_core_busy<'a>(samples: impl IntoIterator<Item = &'a Sample>) -> Vec<(u32, f64)> {
    mean_per_core(samples, |c| c.busy().0)
}

/// Mean CPU % of one core that the engine's process used over the samples
/// that say ([`crate::probe::sample::EngineSample::process_cpu_pct`]); None
/// when none does (older logs, captures).
pub fn mean_process_cpu<'a>(samples: impl IntoIterator<Item = &'a Sample>) -> Option<f64> {
    mean(samples.into_iter().filter_map(|s| s.engine.process_cpu_pct))
}

/// The mean of the values; None when there are none.
pub fn mean(values: impl IntoIterator<Item = f64>) -> Option<f64> {
    let (sum, n) = values
        .into_iter()
        .fold((0.0, 0usize), |(sum, n), v| (sum + v, n + 1));
    (n > 0).then(|| sum / n as f64)
}

/// The mean of `f` over the cores of `s` whose number `keep` keeps; 0 when
/// it keeps none.
pub fn cores_mean(s: &Sample, keep: impl Fn(u32) -> bool, f: impl Fn(&CpuSample) -> f64) -> f64 {
    mean(s.cpus.iter().filter(|c| keep(c.cpu.0)).map(f)).unwrap_or(0.0)
}

/// Mean kernel % (system+irq+softirq) per core over the samples (warm-up left out).
pub fn mean_core_kernel<'a>(samples: impl IntoIterator<Item = &'a Sample>) -> Vec<(u32, f64)> {
    mean_per_core(samples, |c| c.kernel().0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks() {
        assert_eq!(mask_cpus("0"), Vec::<u32>::new());
        assert_eq!(mask_cpus("f"), vec![0, 1, 2, 3]);
        assert_eq!(mask_cpus("00000001,00000002"), vec![1, 32]);
        assert_eq!(cpu_mask(1), "00000002");
        assert_eq!(cpu_mask(33), "00000002,00000000");
        assert_eq!(mask_cpus(&cpu_mask(40)), vec![40]);
        assert_eq!(cpus_mask(&[]), "00000000");
        assert_eq!(cpus_mask(&[0, 1, 2, 3]), "0000000f");
        assert_eq!(cpus_mask(&[1, 33]), "00000002,00000002");
        assert_eq!(mask_cpus(&cpus_mask(&[8, 9, 10, 200])), vec![8, 9, 10, 200]);
    }

    #[test]
    fn versions() {
        assert_eq!(
            version_numbers("12.17.1010 (MT_2140110033)"),
            vec![12, 17, 1010]
        );
        assert_eq!(version_numbers("4.3-1.0.1"), vec![4, 3, 1, 0, 1]);
        assert_eq!(version_numbers("3.0-1 (January 2015)"), vec![3, 0, 1]);
        assert_eq!(pow2_at_least(3.0e6), 4_194_304);
    }
}
