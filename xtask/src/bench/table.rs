//! Plain-text tables: columns padded to their widest cell, separated by two
//! spaces, with a rule under the header. Formatting only.

/// Render `header` and `rows`; the first column is left-aligned, the rest right-aligned.
pub fn render(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            if i < widths.len() {
                widths[i] = widths[i].max(cell.chars().count());
            }
        }
    }
    let header: Vec<String> = header.iter().map(|h| h.to_string()).collect();
    let mut out = line(&header, &widths);
    let rule: Vec<String> = widths.iter().map(|w| "-".repeat(*w)).collect();
    out.push_str(&line(&rule, &widths));
    for row in rows {
        out.push_str(&line(row, &widths));
    }
    out
}

fn line(cells: &[String], widths: &[usize]) -> String {
    let padded: Vec<String> = cells
        .iter()
        .zip(widths)
        .enumerate()
        .map(|(i, (c, w))| {
            if i == 0 {
                format!("{c:<w$}")
            } else {
                format!("{c:>w$}")
            }
        })
        .collect();
    format!("{}\n", padded.join("  ").trim_end())
}

#[cfg(test)]
mod tests {
    #[test]
    fn columns_align() {
        let t = super::render(
            &["n", "value"],
            &[
                vec!["1".into(), "2.50".into()],
                vec!["16".into(), "10.00".into()],
            ],
        );
        assert_eq!(t, "n   value\n--  -----\n1    2.50\n16  10.00\n");
    }
}
