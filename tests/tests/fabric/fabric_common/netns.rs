//! Two network namespaces joined by a veth pair, as two hosts (`fabric_netns.rs`, `fabric_mpirun.rs`): created
//! under unique names (this process's pid and a tag) and removed on drop, whatever the test's outcome.

use std::process::Command;

/// Two namespaces and the veth pair between them; removed on drop (removing a namespace removes its veth end).
pub struct Netns {
    /// The namespaces' names (`ip netns exec NAME ...`).
    pub names: [String; 2],
    /// Each namespace's address on the veth (a /24).
    pub addrs: [&'static str; 2],
}

/// The subnet of [`Netns::addrs`] (for Open MPI's `*_if_include`).
pub const SUBNET: &str = "10.231.0.0/24";

/// Run `ip ARGS`; its stderr as the error.
pub fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| format!("ip: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

impl Netns {
    /// Namespaces `xpm<pid><tag>a`/`b` with 10.231.0.1/24 and 10.231.0.2/24 on the two ends of a veth pair
    /// (`tag`: at most 3 characters, interface names are limited to 15).
    pub fn create(tag: &str) -> Result<Netns, String> {
        let base = format!("xpm{}{tag}", std::process::id());
        let ns = Netns {
            names: [format!("{base}a"), format!("{base}b")],
            addrs: ["10.231.0.1", "10.231.0.2"],
        };
        let veth = [format!("{base}va"), format!("{base}vb")];
        // From here on, a failure removes what was made (the drop of `ns`).
        ip(&["netns", "add", &ns.names[0]])?;
        ip(&["netns", "add", &ns.names[1]])?;
        ip(&[
            "link", "add", &veth[0], "type", "veth", "peer", "name", &veth[1],
        ])
        .inspect_err(|_| {
            let _ = ip(&["link", "del", &veth[0]]);
        })?;
        for ((v, name), addr) in veth.iter().zip(&ns.names).zip(ns.addrs) {
            if let Err(e) = ip(&["link", "set", v, "netns", name]) {
                let _ = ip(&["link", "del", v]);
                return Err(e);
            }
            let cidr = format!("{addr}/24");
            ip(&["-n", name, "addr", "add", &cidr, "dev", v])?;
            ip(&["-n", name, "link", "set", v, "up"])?;
            ip(&["-n", name, "link", "set", "lo", "up"])?;
        }
        Ok(ns)
    }

    /// Pids of processes living in namespace `i`.
    pub fn pids(&self, i: usize) -> Vec<String> {
        Command::new("ip")
            .args(["netns", "pids", &self.names[i]])
            .output()
            .map(|o| {
                String::from_utf8_lossy(&o.stdout)
                    .split_whitespace()
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Kill (SIGKILL) whatever still lives in either namespace; the pids it found.
    pub fn kill_all(&self) -> Vec<String> {
        let left: Vec<String> = (0..2).flat_map(|i| self.pids(i)).collect();
        for pid in &left {
            if let Some(p) = pid
                .parse::<i32>()
                .ok()
                .and_then(rustix::process::Pid::from_raw)
            {
                let _ = rustix::process::kill_process(p, rustix::process::Signal::KILL);
            }
        }
        left
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        // A process left inside keeps a namespace's network alive: end them first.
        self.kill_all();
        for n in &self.names {
            let _ = ip(&["netns", "del", n]);
        }
    }
}

/// Why this machine cannot run the namespace tests, if it cannot.
pub fn cannot_run() -> Option<String> {
    if !super::fabric_available() {
        return Some(
            "this build has no fabric transport (libfabric headers missing at build time)".into(),
        );
    }
    if !rustix::process::geteuid().is_root() {
        return Some("creating network namespaces needs root".into());
    }
    if Command::new("ip").arg("-V").output().is_err() {
        return Some("the `ip` command (iproute2) is missing".into());
    }
    None
}

/// The example programs (`examples/src/bin`, host heaps) next to this test binary (`cargo build` puts them in the
/// profile directory, the test binary one level below, in `deps/`).
pub fn example(name: &str) -> std::path::PathBuf {
    let exe = std::env::current_exe().expect("test binary");
    let dir = exe
        .parent()
        .and_then(|d| d.parent())
        .expect("the profile directory");
    let p = dir.join(name);
    assert!(
        p.exists(),
        "example {} is not built (cargo build -p xpushmem-examples)",
        p.display()
    );
    p
}

/// The examples.
pub const EXAMPLES: [&str; 5] = [
    "hello",
    "ring_put",
    "put_signal_pipeline",
    "jacobi",
    "device_token_ring",
];

/// The environment example `prog` needs beyond the launch: device heaps on ze-emu devices for the device example
/// (its kernels reach the other namespace's PEs through the host proxy and the fabric).
pub fn example_env(prog: &str) -> Vec<(String, String)> {
    if prog != "device_token_ring" {
        return Vec::new();
    }
    let mut env = ze_emu::testing::loader_env();
    env.push(("XPUSHMEM_HEAP".into(), "device".into()));
    env
}

/// One PE's end of a job started by [`run_uid_job`]: the unique ID (PE 0 makes it and publishes it in the file
/// the launcher named, the others read it), then init through the unique-ID bootstrap.
pub fn uid_init() -> xpushmem::Result<xpushmem::Shmem> {
    let var = |k: &str| std::env::var(k).unwrap_or_else(|_| panic!("{k} is set for the PEs"));
    let rank: usize = var("NETNS_RANK").parse().expect("rank");
    let size: usize = var("NETNS_SIZE").parse().expect("size");
    let file = std::path::PathBuf::from(var("NETNS_ID_FILE"));
    let uid = if rank == 0 {
        let id = xpushmem::get_unique_id()?;
        publish_id(&file, id);
        id
    } else {
        let start = std::time::Instant::now();
        loop {
            if let Ok(t) = std::fs::read_to_string(&file) {
                break t.trim().parse().expect("a unique ID");
            }
            assert!(
                start.elapsed() < std::time::Duration::from_secs(60),
                "the unique ID was never published"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    };
    xpushmem::init_attr(xpushmem::InitAttr {
        bootstrap: xpushmem::BootstrapSpec::Uid { uid, rank, size },
        ..xpushmem::InitAttr::default()
    })
}

/// Write the unique ID into `file` at once (through a temporary file and a rename): a reader never sees half of it.
pub fn publish_id(file: &std::path::Path, id: xpushmem::UniqueId) {
    xpushmem_tests::write_whole(file, id.to_string()).expect("publish the ID");
}

/// Wait for every child, at most `limit`; kill those still running then. The exit status of each (None: killed).
pub fn wait_all(
    children: &mut [std::process::Child],
    limit: std::time::Duration,
) -> Vec<Option<std::process::ExitStatus>> {
    let start = std::time::Instant::now();
    let mut status = vec![None; children.len()];
    while status.iter().any(Option::is_none) && start.elapsed() < limit {
        for (s, c) in status.iter_mut().zip(children.iter_mut()) {
            if s.is_none() {
                *s = c.try_wait().expect("wait");
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    for (s, c) in status.iter().zip(children.iter_mut()) {
        if s.is_none() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
    status
}

/// Run test `name` of this test binary as a job of `n` PEs over the namespaces of `ns` (PE `pe` in namespace
/// `super::node_of(pe, n, 2)`), started with the unique-ID bootstrap ([`uid_init`] in each PE), with the wait limit
/// `limit_ms` and the extra environment `env`; kill what is left after twice the limit. Each PE's exit status
/// (`None`: it hung and was killed) and output.
pub fn run_uid_job(
    ns: &Netns,
    name: &str,
    n: usize,
    limit_ms: u64,
    env: &[(&str, &str)],
) -> Vec<(Option<std::process::ExitStatus>, String)> {
    let dir = std::env::temp_dir().join(format!(
        "xpushmem-netns-{}-{}",
        std::process::id(),
        name.replace("::", "-")
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    let exe = std::env::current_exe().expect("test binary");
    let mut children = Vec::new();
    for pe in 0..n {
        let i = super::node_of(pe, n, 2);
        let log = std::fs::File::create(dir.join(format!("pe{pe}.log"))).expect("log");
        let child = Command::new("ip")
            .args(["netns", "exec", &ns.names[i]])
            .arg(&exe)
            .args([name, "--exact", "--nocapture", "--test-threads=1"])
            .env(xpushmem_tests::CASE_VAR, name)
            .env("NETNS_RANK", pe.to_string())
            .env("NETNS_SIZE", n.to_string())
            .env("NETNS_ID_FILE", dir.join("unique-id"))
            .env("XPUSHMEM_BOOTSTRAP_ADDR", ns.addrs[i])
            .env("XPUSHMEM_TIMEOUT_MS", limit_ms.to_string())
            .env("RUST_BACKTRACE", "0")
            .envs(env.iter().copied())
            .stdin(std::process::Stdio::null())
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .spawn()
            .expect("ip netns exec");
        children.push(child);
    }
    let status = wait_all(
        &mut children,
        std::time::Duration::from_millis(2 * limit_ms + 10_000),
    );
    let out = (0..n)
        .map(|pe| {
            let log = std::fs::read_to_string(dir.join(format!("pe{pe}.log"))).unwrap_or_default();
            (status[pe], log)
        })
        .collect();
    let _ = std::fs::remove_dir_all(&dir);
    out
}
