//! Which pairs test in which round. In a round every node is in at most one
//! test, so tests do not disturb each other; a round's tests run at once
//! (at most `--concurrency` at a time).
//!
//! * `ring`: each node with its neighbour (i, i+1 mod N): 2 rounds for an
//!   even N (the even edges, then the odd ones), 3 for an odd N.
//! * `all-pairs`: every pair once by the circle method (one node fixed, the
//!   others rotate): N-1 rounds for an even N, N for an odd N (each round
//!   one node sits out).
//! * `star`: the hub with every other node, one test per round.
//! * `pairs`: the listed pairs, packed greedily into rounds of disjoint pairs.
//!
//! A pair is `(a, b)` with `a` the node that runs the test (it sends first).

/// A fleet's pairs, round by round (indices into the host list).
pub type Rounds = Vec<Vec<(usize, usize)>>;

/// How pairs are chosen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pattern {
    /// Each node with its neighbour.
    Ring,
    /// Every pair once.
    AllPairs,
    /// One hub with every other node.
    Star {
        /// The hub's index.
        hub: usize,
    },
    /// These pairs.
    Pairs(Vec<(usize, usize)>),
}

/// The rounds of `pattern` over `n` hosts.
pub fn rounds(pattern: &Pattern, n: usize) -> Rounds {
    if n < 2 {
        return Vec::new();
    }
    match pattern {
        Pattern::Ring => ring(n),
        Pattern::AllPairs => all_pairs(n),
        Pattern::Star { hub } => (0..n)
            .filter(|i| i != hub && *hub < n)
            .map(|i| vec![(*hub, i)])
            .collect(),
        Pattern::Pairs(p) => pack(p),
    }
}

fn ring(n: usize) -> Rounds {
    if n == 2 {
        return vec![vec![(0, 1)]];
    }
    let edges: Vec<(usize, usize)> = (0..n).map(|i| (i, (i + 1) % n)).collect();
    let even: Vec<_> = edges.iter().copied().step_by(2).take(n / 2).collect();
    let odd: Vec<_> = edges
        .iter()
        .copied()
        .skip(1)
        .step_by(2)
        .take(n / 2)
        .collect();
    let mut out = vec![even, odd];
    if n % 2 == 1 {
        // The closing edge (n-1, 0) shares a node with both rounds.
        out.push(vec![(n - 1, 0)]);
    }
    out
}

fn all_pairs(n: usize) -> Rounds {
    // Circle method over an even count; index `m-1` is the bye when n is odd.
    let m = n + n % 2;
    let mut ring: Vec<usize> = (1..m).collect();
    let mut out = Vec::with_capacity(m - 1);
    for _ in 0..m - 1 {
        let mut round = Vec::with_capacity(m / 2);
        let seats: Vec<usize> = std::iter::once(0).chain(ring.iter().copied()).collect();
        for k in 0..m / 2 {
            let (a, b) = (seats[k], seats[m - 1 - k]);
            if a < n && b < n {
                round.push((a.min(b), a.max(b)));
            }
        }
        round.sort_unstable();
        out.push(round);
        ring.rotate_right(1);
    }
    out
}

/// Greedy packing: each pair goes to the first round where neither node is busy.
fn pack(pairs: &[(usize, usize)]) -> Rounds {
    let mut out: Rounds = Vec::new();
    for &(a, b) in pairs {
        match out
            .iter_mut()
            .find(|r| r.iter().all(|&(x, y)| x != a && x != b && y != a && y != b))
        {
            Some(r) => r.push((a, b)),
            None => out.push(vec![(a, b)]),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    fn disjoint(r: &[(usize, usize)]) -> bool {
        let mut seen = BTreeSet::new();
        r.iter()
            .all(|&(a, b)| a != b && seen.insert(a) && seen.insert(b))
    }

    #[test]
    fn all_pairs_covers_every_pair_once_in_n_minus_1_rounds() {
        for n in 2..=41 {
            let rs = rounds(&Pattern::AllPairs, n);
            assert_eq!(rs.len(), if n % 2 == 0 { n - 1 } else { n }, "n={n}");
            let mut all = BTreeSet::new();
            for r in &rs {
                assert!(disjoint(r), "n={n}: {r:?}");
                for &(a, b) in r {
                    assert!(all.insert((a.min(b), a.max(b))), "n={n}: {a}-{b} twice");
                }
            }
            assert_eq!(all.len(), n * (n - 1) / 2, "n={n}");
        }
        let eight = rounds(&Pattern::AllPairs, 8);
        assert!(eight.iter().all(|r| r.len() == 4));
    }

    #[test]
    fn a_ring_takes_two_rounds_for_even_counts() {
        for n in 2..=33 {
            let rs = rounds(&Pattern::Ring, n);
            let want = if n == 2 {
                1
            } else if n % 2 == 0 {
                2
            } else {
                3
            };
            assert_eq!(rs.len(), want, "n={n}");
            let edges: BTreeSet<_> = rs.iter().flatten().copied().collect();
            let ring: BTreeSet<_> = if n == 2 {
                [(0, 1)].into()
            } else {
                (0..n).map(|i| (i, (i + 1) % n)).collect()
            };
            assert_eq!(edges, ring, "n={n}");
            assert!(rs.iter().all(|r| disjoint(r)), "n={n}");
        }
        assert_eq!(rounds(&Pattern::Ring, 1000).len(), 2);
    }

    #[test]
    fn star_and_listed_pairs() {
        assert_eq!(
            rounds(&Pattern::Star { hub: 2 }, 4),
            vec![vec![(2, 0)], vec![(2, 1)], vec![(2, 3)]]
        );
        let rs = rounds(&Pattern::Pairs(vec![(0, 1), (2, 3), (1, 2), (0, 3)]), 4);
        assert_eq!(rs, vec![vec![(0, 1), (2, 3)], vec![(1, 2), (0, 3)]]);
    }
}
