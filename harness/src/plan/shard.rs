//! Sharding: `--shard K/N` runs one of N parts of a plan, so that CI can
//! spread a matrix over N jobs and `vkexit merge` can join their results.
//!
//! A cell's shard depends on the cell alone: the FNV-1a 64-bit hash of its
//! identity string ([`CellId::key`]), modulo N. Cells added to a matrix (a
//! new case, policy or driver) never move the others to another shard, and
//! every machine and every vkexit build puts a cell in the same shard. The
//! price is balance: with few cells, shards can differ in size.

use std::fmt;
use std::str::FromStr;
use vkexit_evidence::results::CellId;

/// Shard `index` of `count`, 1-based as written on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    index: u64,
    count: u64,
}

/// A shard that is none: not `K/N`, or K outside 1..=N.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BadShard {
    /// The text is not `K/N` of two numbers.
    #[error("`{0}`: expected K/N with 1 ≤ K ≤ N, e.g. 1/4")]
    NotKOfN(String),
    /// K is 0 or beyond N, or N is 0.
    #[error("shard {index} of {count}: expected K/N with 1 ≤ K ≤ N, e.g. 1/4")]
    OutOfRange {
        /// K.
        index: u64,
        /// N.
        count: u64,
    },
}

impl Shard {
    /// Shard `index` of `count`.
    pub fn new(index: u64, count: u64) -> Result<Shard, BadShard> {
        if count == 0 || index == 0 || index > count {
            return Err(BadShard::OutOfRange { index, count });
        }
        Ok(Shard { index, count })
    }

    /// K, from 1.
    pub fn index(self) -> u64 {
        self.index
    }

    /// N.
    pub fn count(self) -> u64 {
        self.count
    }

    /// Whether the cell belongs to this shard.
    pub fn contains(self, id: &CellId) -> bool {
        of(id, self.count) == self.index
    }
}

/// The 1-based shard of `count` that a cell belongs to.
pub fn of(id: &CellId, count: u64) -> u64 {
    fnv1a64(id.key().as_bytes()) % count.max(1) + 1
}

impl FromStr for Shard {
    type Err = BadShard;

    fn from_str(text: &str) -> Result<Shard, BadShard> {
        let bad = || BadShard::NotKOfN(text.to_string());
        let (k, n) = text.split_once('/').ok_or_else(bad)?;
        let k: u64 = k.trim().parse().map_err(|_| bad())?;
        let n: u64 = n.trim().parse().map_err(|_| bad())?;
        Shard::new(k, n)
    }
}

impl fmt::Display for Shard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

/// FNV-1a, 64 bits: small, fixed, and the same everywhere (std's hasher is
/// randomly seeded per process).
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    bytes
        .iter()
        .fold(OFFSET, |h, &b| (h ^ u64::from(b)).wrapping_mul(PRIME))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{BUILTIN_CASES, POLICIES};

    fn id(case: &str, runtime: &str, driver: &str, emulation: &str) -> CellId {
        CellId {
            case: case.into(),
            runtime: runtime.into(),
            driver: driver.into(),
            layers: vec!["validation".into()],
            emulation: emulation.into(),
        }
    }

    /// Every built-in cell on a few drivers and emulations.
    fn matrix(drivers: &[&str]) -> Vec<CellId> {
        let mut ids = Vec::new();
        for driver in drivers {
            for emulation in ["none", "tegra"] {
                for case in BUILTIN_CASES {
                    for policy in POLICIES {
                        ids.push(id(case, &format!("refrt:{policy}"), driver, emulation));
                    }
                }
            }
        }
        ids
    }

    #[test]
    fn fnv1a64_known_vectors() {
        assert_eq!(fnv1a64(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a64(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a64(b"foobar"), 0x8594_4171_f739_67e8);
    }

    #[test]
    fn the_identity_string_is_fixed() {
        let mut cell = id("clean-exit", "refrt:never", "lavapipe", "none");
        cell.layers = vec!["trace".into(), "validation".into()];
        assert_eq!(
            cell.key(),
            "clean-exit\u{1f}refrt:never\u{1f}lavapipe\u{1f}trace+validation\u{1f}none"
        );
    }

    #[test]
    fn a_cell_stays_in_its_shard_across_builds_and_machines() {
        // Golden values: a change here moves cells between CI jobs.
        let a = id("clean-exit", "refrt:never", "lavapipe", "none");
        let b = id("handler-before-load", "refrt:guarded", "nvidia", "tegra");
        assert_eq!(fnv1a64(a.key().as_bytes()), 0x19cb_5890_5b30_53f9);
        assert_eq!(fnv1a64(b.key().as_bytes()), 0xb4c6_ff71_8319_923c);
        assert_eq!((of(&a, 2), of(&a, 3)), (2, 2));
        assert_eq!((of(&b, 2), of(&b, 3)), (1, 2));
    }

    #[test]
    fn shards_partition_the_plan() {
        let ids = matrix(&["lavapipe", "nvidia", "radv"]);
        for n in 1..=8 {
            let shards: Vec<Shard> = (1..=n).map(|k| Shard::new(k, n).unwrap()).collect();
            for cell in &ids {
                let owners = shards.iter().filter(|s| s.contains(cell)).count();
                assert_eq!(owners, 1, "{cell:?} in {owners} of {n} shards");
            }
        }
        // And no shard of a sizeable plan is left empty.
        let two: Vec<_> = ids.iter().filter(|c| of(c, 2) == 1).collect();
        assert!(!two.is_empty() && two.len() < ids.len());
    }

    #[test]
    fn adding_cells_moves_no_other_cell() {
        let small = matrix(&["lavapipe"]);
        let before: Vec<u64> = small.iter().map(|c| of(c, 3)).collect();
        let large = matrix(&["lavapipe", "nvidia", "anv"]);
        let after: Vec<u64> = large
            .iter()
            .filter(|c| small.contains(c))
            .map(|c| of(c, 3))
            .collect();
        assert_eq!(before, after);
    }

    #[test]
    fn the_argument_is_checked() {
        assert_eq!("2/3".parse::<Shard>().unwrap(), Shard::new(2, 3).unwrap());
        assert_eq!("1/1".parse::<Shard>().unwrap().to_string(), "1/1");
        for bad in ["0/2", "3/2", "1/0", "2", "a/b", "-1/2", "1/2/3", ""] {
            let e = bad.parse::<Shard>().unwrap_err().to_string();
            assert!(e.contains("1 ≤ K ≤ N"), "{bad}: {e}");
        }
    }
}
