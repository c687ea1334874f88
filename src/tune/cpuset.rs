//! CPU sets as the kernel writes them in sysfs: hex masks (`rps_cpus`,
//! `xps_cpus`: `00000000,0000000f`) and lists (`smp_affinity_list`: `0-3`).
//!
//! Tuning compares what it wrote with what it reads back, and the kernel
//! pads masks to the number of possible CPUs, so both forms are brought to
//! one canonical text here: the shortest mask (`f`, `1,00000000`) and the
//! compact list (`0-3,8`). Parsing is strict: a malformed mask is an error,
//! never an empty set.

use crate::units::{format_cpu_list, parse_cpu_list, CpuId};

/// Largest CPU number accepted in a mask or list (the kernel's NR_CPUS limit is 8192).
pub const MAX_CPU: u32 = 8191;

/// A CPU set that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CpuSetError {
    /// Not a hex mask.
    #[error("'{text}' is not a CPU mask ({why}); use hex as sysfs prints it, e.g. f or 00000000,000000ff")]
    Mask {
        /// The text.
        text: String,
        /// What is wrong with it.
        why: &'static str,
    },
    /// Not a CPU list.
    #[error(transparent)]
    List(#[from] crate::units::UnitError),
    /// A list naming a CPU no kernel has.
    #[error("'{text}' names a CPU above {MAX_CPU}")]
    Above {
        /// The text.
        text: String,
    },
}

/// Parse a hex CPU mask: comma-separated 32-bit words, most significant
/// first, optional `0x` prefix; `0` is the empty set.
pub fn parse_mask(s: &str) -> Result<Vec<u32>, CpuSetError> {
    let t = s.trim();
    let t = t
        .strip_prefix("0x")
        .or_else(|| t.strip_prefix("0X"))
        .unwrap_or(t);
    let err = |why: &'static str| CpuSetError::Mask {
        text: s.to_string(),
        why,
    };
    if t.is_empty() {
        return Err(err("empty"));
    }
    let mut cpus = Vec::new();
    for (i, word) in t.rsplit(',').enumerate() {
        if word.is_empty() || word.len() > 8 {
            return Err(err("each comma-separated word holds 1 to 8 hex digits"));
        }
        let v = u32::from_str_radix(word, 16).map_err(|_| err("not hex"))?;
        for bit in 0..32u32 {
            if v & (1 << bit) != 0 {
                let cpu = u32::try_from(i)
                    .ok()
                    .and_then(|i| i.checked_mul(32))
                    .and_then(|b| b.checked_add(bit))
                    .filter(|c| *c <= MAX_CPU)
                    .ok_or_else(|| err("CPU number too large"))?;
                cpus.push(cpu);
            }
        }
    }
    cpus.sort_unstable();
    Ok(cpus)
}

/// The shortest mask of a CPU set: `0`, `f`, `1,00000000`.
pub fn format_mask(cpus: &[u32]) -> String {
    let Some(&top) = cpus.iter().max() else {
        return "0".into();
    };
    let mut words = vec![0u32; top as usize / 32 + 1];
    for c in cpus {
        words[*c as usize / 32] |= 1 << (c % 32);
    }
    let mut parts: Vec<String> = Vec::with_capacity(words.len());
    for (i, w) in words.iter().rev().enumerate() {
        parts.push(if i == 0 {
            format!("{w:x}")
        } else {
            format!("{w:08x}")
        });
    }
    parts.join(",")
}

/// Parse a CPU list (`0-3,8`) into sorted numbers.
pub fn parse_list(s: &str) -> Result<Vec<u32>, CpuSetError> {
    let cpus = parse_cpu_list(s).map_err(CpuSetError::List)?;
    let mut v: Vec<u32> = cpus.into_iter().map(|c| c.0).collect();
    if v.iter().any(|c| *c > MAX_CPU) {
        return Err(CpuSetError::Above {
            text: s.to_string(),
        });
    }
    v.sort_unstable();
    v.dedup();
    Ok(v)
}

/// The compact list of a CPU set (`0-3,8`).
pub fn format_list(cpus: &[u32]) -> String {
    let ids: Vec<CpuId> = cpus.iter().map(|c| CpuId(*c)).collect();
    format_cpu_list(&ids)
}

/// Canonical text of a mask (`00000000,00000003` → `3`), or the input when it does not parse.
pub fn canonical_mask(s: &str) -> String {
    parse_mask(s)
        .map(|v| format_mask(&v))
        .unwrap_or_else(|_| s.trim().to_string())
}

/// Canonical text of a list (`0,1,2` → `0-2`), or the input when it does not parse.
pub fn canonical_list(s: &str) -> String {
    parse_list(s)
        .map(|v| format_list(&v))
        .unwrap_or_else(|_| s.trim().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks_round_trip_in_canonical_form() {
        assert_eq!(parse_mask("00000000,0000000f").unwrap(), vec![0, 1, 2, 3]);
        assert_eq!(parse_mask("0x3").unwrap(), vec![0, 1]);
        assert_eq!(parse_mask("0").unwrap(), Vec::<u32>::new());
        assert_eq!(format_mask(&[]), "0");
        assert_eq!(format_mask(&[0, 1, 2, 3]), "f");
        assert_eq!(format_mask(&[32]), "1,00000000");
        assert_eq!(canonical_mask("00000001,00000000"), "1,00000000");
        for bad in ["", "g", "123456789", "1,,0", ","] {
            assert!(parse_mask(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn lists_round_trip_in_canonical_form() {
        assert_eq!(canonical_list("0,1,2,5"), "0-2,5");
        assert_eq!(parse_list("3,1").unwrap(), vec![1, 3]);
        assert!(parse_list("9000").is_err());
    }
}
