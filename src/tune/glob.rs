//! Shell-style globs for interface names (`enp*`, `eth[0-3]`, `veth-?`,
//! `eth[!0]`): compiled once, matched in time linear in the name.
//!
//! A profile can come from a peer (`profile apply --peer`), so matching must
//! never backtrack: a [`Glob`] is run as a set of positions in the pattern
//! (a Thompson-style simulation), so one name costs at most
//! `pattern tokens × name chars` steps whatever the pattern holds — 63 stars
//! cost the same as one. The syntax is the one profiles always had: `*`,
//! `?`, `[abc]`, `[a-z]`, `[!x]` / `[^x]` (a `]` right after the `[` or the
//! `!` is a literal); no escapes, no braces. This module only matches; it
//! decides nothing about which patterns a profile may hold.

/// One element of a compiled pattern.
#[derive(Debug, Clone, PartialEq)]
enum Token {
    /// A literal character.
    Lit(char),
    /// `?`: any one character.
    Any,
    /// `*`: any run of characters, empty included.
    Star,
    /// `[...]`: one character in (or, negated, not in) the ranges.
    Class {
        negate: bool,
        ranges: Vec<(char, char)>,
    },
}

/// A pattern that is not a glob.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GlobError {
    /// A `[` with no `]` after it.
    #[error("unclosed '[' in pattern '{pattern}'")]
    Unclosed {
        /// The pattern.
        pattern: String,
    },
}

/// A compiled glob.
#[derive(Debug, Clone, PartialEq)]
pub struct Glob {
    tokens: Vec<Token>,
}

impl Glob {
    /// Compile a pattern; an unclosed `[` anywhere is an error.
    pub fn new(pattern: &str) -> Result<Glob, GlobError> {
        let p: Vec<char> = pattern.chars().collect();
        let mut tokens = Vec::with_capacity(p.len());
        let mut i = 0;
        while i < p.len() {
            match p[i] {
                // Runs of stars mean what one star means.
                '*' if tokens.last() == Some(&Token::Star) => {}
                '*' => tokens.push(Token::Star),
                '?' => tokens.push(Token::Any),
                '[' => {
                    let (tok, used) = class(&p[i + 1..]).ok_or_else(|| GlobError::Unclosed {
                        pattern: pattern.to_string(),
                    })?;
                    tokens.push(tok);
                    i += used;
                }
                c => tokens.push(Token::Lit(c)),
            }
            i += 1;
        }
        Ok(Glob { tokens })
    }

    /// Does the whole of `name` match?
    pub fn matches(&self, name: &str) -> bool {
        let n = self.tokens.len();
        let mut now = vec![false; n + 1];
        now[0] = true;
        self.close(&mut now);
        let mut next = vec![false; n + 1];
        for c in name.chars() {
            next.iter_mut().for_each(|s| *s = false);
            let mut any = false;
            for (i, tok) in self.tokens.iter().enumerate() {
                if !now[i] {
                    continue;
                }
                let to = match tok {
                    Token::Star => i,
                    Token::Any => i + 1,
                    Token::Lit(l) if *l == c => i + 1,
                    Token::Class { negate, ranges }
                        if ranges.iter().any(|&(a, b)| a <= c && c <= b) != *negate =>
                    {
                        i + 1
                    }
                    _ => continue,
                };
                next[to] = true;
                any = true;
            }
            if !any {
                return false;
            }
            self.close(&mut next);
            std::mem::swap(&mut now, &mut next);
        }
        now[n]
    }

    /// A star may match nothing: being before it is being after it too.
    fn close(&self, set: &mut [bool]) {
        for (i, tok) in self.tokens.iter().enumerate() {
            if set[i] && *tok == Token::Star {
                set[i + 1] = true;
            }
        }
    }
}

/// A class: `p` starts after the `[`; returns it and the chars used, `]`
/// included; None when no `]` closes it.
fn class(p: &[char]) -> Option<(Token, usize)> {
    let mut i = 0;
    let negate = matches!(p.first(), Some('!') | Some('^'));
    if negate {
        i += 1;
    }
    let mut ranges = Vec::new();
    let mut first = true;
    while i < p.len() {
        if p[i] == ']' && !first {
            return Some((Token::Class { negate, ranges }, i + 1));
        }
        first = false;
        if i + 2 < p.len() && p[i + 1] == '-' && p[i + 2] != ']' {
            ranges.push((p[i], p[i + 2]));
            i += 3;
        } else {
            ranges.push((p[i], p[i]));
            i += 1;
        }
    }
    None
}

/// Shell-style glob (`*`, `?`, `[abc]`, `[a-z]`, `[!x]`) against a whole name.
pub fn glob_match(pattern: &str, name: &str) -> Result<bool, GlobError> {
    Glob::new(pattern).map(|g| g.matches(name))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The matcher profiles had before: plain backtracking, exponential on
    /// many stars, kept here only as the reference on short inputs.
    fn reference(pattern: &str, name: &str) -> Result<bool, GlobError> {
        fn go(p: &[char], n: &[char]) -> Result<bool, GlobError> {
            match p.first() {
                None => Ok(n.is_empty()),
                Some('*') => {
                    for k in 0..=n.len() {
                        if go(&p[1..], &n[k..])? {
                            return Ok(true);
                        }
                    }
                    Ok(false)
                }
                Some('?') => Ok(!n.is_empty() && go(&p[1..], &n[1..])?),
                Some('[') => {
                    let unclosed = || GlobError::Unclosed {
                        pattern: String::new(),
                    };
                    let (tok, used) = class(&p[1..]).ok_or_else(unclosed)?;
                    let Some(&c) = n.first() else {
                        return Ok(false);
                    };
                    let hit = match tok {
                        Token::Class { negate, ranges } => {
                            ranges.iter().any(|&(a, b)| a <= c && c <= b) != negate
                        }
                        _ => unreachable!(),
                    };
                    Ok(hit && go(&p[1 + used..], &n[1..])?)
                }
                Some(&c) => Ok(n.first() == Some(&c) && go(&p[1..], &n[1..])?),
            }
        }
        // The reference validates the whole pattern up front, as Glob::new does.
        Glob::new(pattern)?;
        let p: Vec<char> = pattern.chars().collect();
        let n: Vec<char> = name.chars().collect();
        go(&p, &n)
    }

    #[test]
    fn the_syntax_profiles_use() {
        assert!(glob_match("enp*", "enp3s0").unwrap());
        assert!(!glob_match("enp*", "eth0").unwrap());
        assert!(glob_match("eth[0-2]", "eth1").unwrap());
        assert!(!glob_match("eth[!0-2]", "eth1").unwrap());
        assert!(glob_match("eth[^0-2]", "eth3").unwrap());
        assert!(glob_match("veth-?", "veth-a").unwrap());
        assert!(glob_match("a[]]b", "a]b").unwrap());
        assert!(glob_match("a[!]]b", "axb").unwrap());
        assert!(glob_match("*", "").unwrap());
        assert!(!glob_match("?", "").unwrap());
        assert!(glob_match("eth[", "eth0").is_err());
        // Unclosed anywhere, even where a match would stop before it.
        assert!(glob_match("x[", "probe").is_err());
    }

    #[test]
    fn sixty_three_stars_cost_nothing() {
        // Backtracking took about 10 s for a 6-character name and never
        // finished for 15; this is one pass over the name.
        let p = format!("{}#", "*".repeat(63));
        for name in ["eth0", "enp3s0", "abcdefghijklmno"] {
            assert!(!glob_match(&p, name).unwrap());
        }
        assert!(glob_match(&p, "abcdefghijklmn#").unwrap());
        let p = "*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*b";
        assert!(!glob_match(p, &"a".repeat(4096)).unwrap());
    }

    #[test]
    fn a_long_adversarial_pattern_finishes() {
        // 64 tokens of every kind against a long name: a liveness bound only.
        let p = "*?[a-z]*?[!0]*".repeat(5);
        let name = "a".repeat(100_000);
        let t = std::time::Instant::now();
        assert!(glob_match(&p, &name).unwrap());
        assert!(!glob_match(&format!("{p}#"), &name).unwrap());
        assert!(
            t.elapsed() < std::time::Duration::from_secs(30),
            "liveness bound"
        );
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]
        #[test]
        fn agrees_with_the_reference(
            pattern in "[ab*?\\[\\]!^-]{0,8}",
            name in "[ab\\]!-]{0,6}",
        ) {
            prop_assert_eq!(glob_match(&pattern, &name), reference(&pattern, &name));
        }
    }
}
