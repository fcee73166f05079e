//! The node layout of a team, for the node-aware (hierarchical) algorithms: the team's members grouped by the
//! shared-memory domain they live in, each group with a leader.
//!
//! ## Which PEs share a group
//! Two members share a group when they are on the same node (`Shmem::nodes()`, from the bootstrap, or
//! `XPUSHMEM_NODE_ID`) *and* reach each other through shared memory: with `XPUSHMEM_TRANSPORT=fabric` every peer is
//! reached through the fabric, so every member is a group of its own. This is the rule the transport set-up routes
//! by (same node and not forced onto the fabric: `shm`/`ze`; otherwise `fabric`), computed from the same job-wide
//! inputs (the node table and the configuration), so every member of the team computes the same groups.
//!
//! ## Order and leaders
//! Groups are numbered in the order of their first member in team order, and list their members in team order;
//! a group's leader is its first member (its lowest team rank). The node-aware algorithms apply ("pay") when the
//! team has more than one group and at least one group holds two members or more.

/// The groups of one team (team ranks), the same on every member.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Groups {
    /// Group of each member (by team rank).
    pub group_of: Vec<usize>,
    /// Rank of each member inside its group (0: the leader).
    pub rank_in: Vec<usize>,
    /// The members of each group, in team order (the first is the leader).
    pub members: Vec<Vec<usize>>,
}

impl Groups {
    /// The groups of a team of `n` members whose member `i` lives in domain `domain(i)`.
    pub fn new(n: usize, domain: impl Fn(usize) -> usize) -> Groups {
        let mut index: std::collections::HashMap<usize, usize> = Default::default();
        let mut members: Vec<Vec<usize>> = Vec::new();
        let mut group_of = Vec::with_capacity(n);
        let mut rank_in = Vec::with_capacity(n);
        for i in 0..n {
            let g = *index.entry(domain(i)).or_insert_with(|| {
                members.push(Vec::new());
                members.len() - 1
            });
            rank_in.push(members[g].len());
            members[g].push(i);
            group_of.push(g);
        }
        Groups {
            group_of,
            rank_in,
            members,
        }
    }

    /// The leader (team rank) of group `g`.
    pub fn leader(&self, g: usize) -> usize {
        self.members[g][0]
    }

    /// Number of groups.
    pub fn count(&self) -> usize {
        self.members.len()
    }

    /// Whether the node-aware algorithms pay: more than one group, one of them with two members or more.
    pub fn pays(&self) -> bool {
        self.members.len() > 1 && self.members.iter().any(|m| m.len() > 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_follow_first_appearance_and_team_order() {
        // Team order 0..6 over domains [7, 3, 7, 3, 9, 7].
        let d = [7, 3, 7, 3, 9, 7];
        let g = Groups::new(d.len(), |i| d[i]);
        assert_eq!(g.members, vec![vec![0, 2, 5], vec![1, 3], vec![4]]);
        assert_eq!(g.group_of, vec![0, 1, 0, 1, 2, 0]);
        assert_eq!(g.rank_in, vec![0, 0, 1, 1, 0, 2]);
        assert_eq!((g.leader(0), g.leader(1), g.leader(2)), (0, 1, 4));
        assert!(g.pays());
        // One node, or every member alone: flat.
        assert!(!Groups::new(4, |_| 0).pays());
        assert!(!Groups::new(4, |i| i).pays());
        assert!(!Groups::new(1, |_| 0).pays());
    }
}
