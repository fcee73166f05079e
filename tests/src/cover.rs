//! Covering sets for the product loops of the collective suites (type x op x algorithm x team shape x size class):
//! by default a suite runs a set of rows in which every required pair of values appears at least once (every
//! algorithm meets every team shape, every (type, op) pair, every (algorithm, size class) pair);
//! `XPUSHMEM_TEST_DEPTH=full` keeps the full product. Rows are built deterministically, so every PE of a job
//! computes the same set (the rows drive collective calls).

use std::collections::BTreeSet;

/// Environment variable choosing the depth of the product loops: `full` for the whole product.
pub const DEPTH_VAR: &str = "XPUSHMEM_TEST_DEPTH";

/// How much of a product loop runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Depth {
    /// A covering set of the required pairs (the default).
    Cover,
    /// The full product (`XPUSHMEM_TEST_DEPTH=full`).
    Full,
}

/// The depth this process runs at (the harness passes the variable to the PEs).
pub fn depth() -> Depth {
    match std::env::var(DEPTH_VAR).as_deref() {
        Ok("full") => Depth::Full,
        _ => Depth::Cover,
    }
}

/// Every row of the product of `dims` (row `r[i] < dims[i]`) that `valid` accepts, in lexicographic order.
pub fn product(dims: &[usize], valid: impl Fn(&[usize]) -> bool) -> Vec<Vec<usize>> {
    let mut rows = Vec::new();
    if dims.contains(&0) {
        return rows;
    }
    let mut row = vec![0; dims.len()];
    loop {
        if valid(&row) {
            rows.push(row.clone());
        }
        // Odometer increment, last dimension fastest.
        let mut i = dims.len();
        loop {
            if i == 0 {
                return rows;
            }
            i -= 1;
            row[i] += 1;
            if row[i] < dims[i] {
                break;
            }
            row[i] = 0;
        }
    }
}

/// A greedy covering set: rows of the valid product such that, for every dimension pair `(a, b)` in `pairs`,
/// every value pair `(x, y)` that some valid row has appears in at least one chosen row. Each step takes the
/// valid row that covers the most pairs not yet covered (the first such row in lexicographic order).
pub fn pairwise(
    dims: &[usize],
    pairs: &[(usize, usize)],
    valid: impl Fn(&[usize]) -> bool,
) -> Vec<Vec<usize>> {
    let candidates = product(dims, valid);
    let key = |p: usize, row: &[usize]| (p, row[pairs[p].0], row[pairs[p].1]);
    let mut uncovered: BTreeSet<(usize, usize, usize)> = candidates
        .iter()
        .flat_map(|row| (0..pairs.len()).map(move |p| key(p, row)))
        .collect();
    let mut chosen = Vec::new();
    while !uncovered.is_empty() {
        let (best, gain) = candidates
            .iter()
            .enumerate()
            .map(|(i, row)| {
                let gain = (0..pairs.len())
                    .filter(|&p| uncovered.contains(&key(p, row)))
                    .count();
                (i, gain)
            })
            .fold((0, 0), |acc, x| if x.1 > acc.1 { x } else { acc });
        debug_assert!(gain > 0, "an uncovered pair comes from some candidate");
        let row = &candidates[best];
        for p in 0..pairs.len() {
            uncovered.remove(&key(p, row));
        }
        chosen.push(row.clone());
    }
    chosen
}

/// The rows a suite runs: [`pairwise`] by default, the whole valid [`product`] at `XPUSHMEM_TEST_DEPTH=full`.
pub fn rows(
    dims: &[usize],
    pairs: &[(usize, usize)],
    valid: impl Fn(&[usize]) -> bool,
) -> Vec<Vec<usize>> {
    match depth() {
        Depth::Full => product(dims, valid),
        Depth::Cover => pairwise(dims, pairs, valid),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every value pair of every required dimension pair that the full product has (computed by plain nested
    /// loops, independently of `product`) is in the cover, and every row of the cover is a valid product row.
    fn check(dims: &[usize], pairs: &[(usize, usize)], valid: impl Fn(&[usize]) -> bool + Copy) {
        let cover = pairwise(dims, pairs, valid);
        for row in &cover {
            assert_eq!(row.len(), dims.len());
            assert!(row.iter().zip(dims).all(|(v, d)| v < d), "{row:?} in range");
            assert!(valid(row), "{row:?} is valid");
        }
        // The reference: all rows by recursion.
        fn all(dims: &[usize], prefix: &mut Vec<usize>, out: &mut Vec<Vec<usize>>) {
            if prefix.len() == dims.len() {
                out.push(prefix.clone());
                return;
            }
            for v in 0..dims[prefix.len()] {
                prefix.push(v);
                all(dims, prefix, out);
                prefix.pop();
            }
        }
        let mut full = Vec::new();
        all(dims, &mut Vec::new(), &mut full);
        full.retain(|r| valid(r));
        assert_eq!(
            full,
            product(dims, valid),
            "product agrees with the reference"
        );
        for &(a, b) in pairs {
            for r in &full {
                assert!(
                    cover.iter().any(|c| c[a] == r[a] && c[b] == r[b]),
                    "pair ({a}={}, {b}={}) of {r:?} is covered",
                    r[a],
                    r[b]
                );
            }
        }
        assert!(cover.len() <= full.len());
    }

    #[test]
    fn pairwise_covers_every_required_pair_of_the_full_product() {
        // type x op x algorithm x shape x size class, with bitwise ops (op >= 4) only for integer types (< 10).
        let dims = [12, 7, 5, 9, 4];
        let pairs = [(2, 3), (0, 1), (2, 4)];
        let valid = |r: &[usize]| r[0] < 10 || r[1] < 4;
        check(&dims, &pairs, valid);
        let cover = pairwise(&dims, &pairs, valid);
        let full = product(&dims, valid).len();
        assert!(cover.len() * 20 < full, "{} rows of {full}", cover.len());
        // Smaller shapes, all pairs, no constraint.
        check(&[3, 3, 3], &[(0, 1), (0, 2), (1, 2)], |_| true);
        check(&[2, 1, 4], &[(0, 2)], |_| true);
        check(&[4, 0], &[(0, 1)], |_| true);
    }

    #[test]
    fn pairwise_is_deterministic() {
        let dims = [5, 4, 3];
        let pairs = [(0, 1), (1, 2)];
        assert_eq!(
            pairwise(&dims, &pairs, |_| true),
            pairwise(&dims, &pairs, |_| true)
        );
    }
}
