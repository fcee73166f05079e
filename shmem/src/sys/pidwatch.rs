//! Watching node peers' processes through pidfds: a peer that exits is seen at once, zombie or reaped.

use rustix::fd::OwnedFd;

/// Watches node peers' processes through pidfds: a peer that exits is seen at once, zombie or reaped.
#[derive(Debug, Default)]
pub struct PeerWatch {
    peers: Vec<(usize, OwnedFd)>,
}

impl PeerWatch {
    /// Watch the given (PE, pid) pairs. PEs whose pidfd cannot be opened (already gone) are reported by `check`.
    pub fn new(peers: &[(usize, u32)]) -> (PeerWatch, Vec<usize>) {
        let mut gone = Vec::new();
        let mut w = PeerWatch::default();
        for &(pe, pid) in peers {
            match rustix::process::Pid::from_raw(pid as i32)
                .map(|p| rustix::process::pidfd_open(p, rustix::process::PidfdFlags::empty()))
            {
                Some(Ok(fd)) => w.peers.push((pe, fd)),
                _ => gone.push(pe),
            }
        }
        (w, gone)
    }

    /// The watched PEs whose processes have exited, ascending. Never blocks.
    pub fn exited(&self) -> Vec<usize> {
        if self.peers.is_empty() {
            return Vec::new();
        }
        let mut fds: Vec<rustix::event::PollFd<'_>> = self
            .peers
            .iter()
            .map(|(_, fd)| rustix::event::PollFd::new(fd, rustix::event::PollFlags::IN))
            .collect();
        let zero = rustix::time::Timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        match rustix::event::poll(&mut fds, Some(&zero)) {
            Ok(0) | Err(_) => Vec::new(),
            Ok(_) => fds
                .iter()
                .zip(&self.peers)
                .filter(|(p, _)| !p.revents().is_empty())
                .map(|(_, (pe, _))| *pe)
                .collect(),
        }
    }
}
