//! Shared helpers of the team and collective suites: a lighter wait back-off for their PEs (8 PEs share 2 cores;
//! `pe_test!(name, env [crate::coll_common::ENV], ..)`), the team shapes every collective is run on, and reference
//! folds.
#![allow(dead_code)]

use xpushmem::{ReduceOp, Reducible, Result, Shmem, Team};

/// Environment of every PE of these suites: short spinning, since PEs outnumber cores.
pub const ENV: &[(&str, &str)] = &[
    ("XPUSHMEM_SPIN_COUNT", "64"),
    ("XPUSHMEM_YIELD_COUNT", "64"),
    ("XPUSHMEM_SLEEP_MAX_US", "50"),
];

/// One team shape of the conformance runs: the team (on its members), and its members as global PEs.
pub struct Shape {
    /// What the shape is.
    pub name: String,
    /// The team, on members.
    pub team: Option<Team>,
    /// Destroy at the end (not a predefined team).
    pub owned: bool,
}

impl Shape {
    /// Global PEs of the team (on a member).
    pub fn members(&self) -> Vec<usize> {
        let t = self.team.as_ref().expect("member");
        (0..t.n_pes())
            .map(|i| t.global_pe(i).expect("in range"))
            .collect()
    }
}

/// The team shapes: world, shared, strided subsets (evens, odds, stride 3, a single PE), 2-D rows and columns
/// (rows of 2 and of 3), and a split of a split. Collective over the world.
pub fn shapes(sh: &Shmem) -> Result<Vec<Shape>> {
    let n = sh.n_pes();
    let world = sh.team_world();
    let mut v = vec![
        Shape {
            name: "world".into(),
            team: Some(world.clone()),
            owned: false,
        },
        Shape {
            name: "shared".into(),
            team: Some(sh.team_shared()),
            owned: false,
        },
    ];
    let evens = sh.team_split_strided(&world, 0, 2, n.div_ceil(2), None)?;
    v.push(Shape {
        name: "evens".into(),
        team: evens.clone(),
        owned: true,
    });
    if n >= 2 {
        let odds = sh.team_split_strided(&world, 1, 2, n / 2, None)?;
        v.push(Shape {
            name: "odds".into(),
            team: odds,
            owned: true,
        });
    }
    if n >= 4 {
        let t = sh.team_split_strided(&world, 1, 3, (n - 1).div_ceil(3), None)?;
        v.push(Shape {
            name: "stride3".into(),
            team: t,
            owned: true,
        });
    }
    let last = sh.team_split_strided(&world, n - 1, 1, 1, None)?;
    v.push(Shape {
        name: "single".into(),
        team: last,
        owned: true,
    });
    for xr in [2usize, 3] {
        if n >= xr {
            let (x, y) = sh.team_split_2d(&world, xr, None, None)?;
            v.push(Shape {
                name: format!("rows of {xr}"),
                team: Some(x),
                owned: true,
            });
            v.push(Shape {
                name: format!("columns of {xr}"),
                team: Some(y),
                owned: true,
            });
        }
    }
    // A split of the evens: all but its first member (a placeholder on the other PEs keeps the lists equal).
    if n.div_ceil(2) >= 3 {
        let t = match &evens {
            Some(e) => sh.team_split_strided(e, 1, 1, e.n_pes() - 1, None)?,
            None => None,
        };
        v.push(Shape {
            name: "evens without PE 0".into(),
            team: t,
            owned: true,
        });
    }
    Ok(v)
}

/// Destroy the shapes' own teams (collective over each team, in the order of creation).
pub fn destroy(sh: &Shmem, shapes: Vec<Shape>) -> Result<()> {
    for s in shapes {
        if let (true, Some(t)) = (s.owned, s.team) {
            sh.team_destroy(t)?;
        }
    }
    sh.barrier_all()
}

/// Left fold of `inputs` (one vector per member, in member order) with `op`.
pub fn fold<T: Reducible>(op: ReduceOp, inputs: &[Vec<T>]) -> Vec<T> {
    let mut acc = inputs[0].clone();
    for x in &inputs[1..] {
        for (a, b) in acc.iter_mut().zip(x) {
            *a = T::combine(op, *a, *b);
        }
    }
    acc
}
