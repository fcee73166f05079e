//! Security of the start-up against processes outside the job (issue 26, items 3, 4 and 5): the unique-ID
//! rendezvous cannot be blocked or blown up by clients without the key, and the node's fd exchange cannot be
//! squatted by a name derived from what `/proc/net/unix` shows.
//!
//! The job is started as a framework does it: PE 0 creates the unique ID (its process serves the rendezvous),
//! publishes it in a file, and the other PEs read it and join (`BootstrapSpec::Uid`). The attacker is this test
//! process (threads), of the same uid: the rendezvous cannot tell uids apart, so this is the strongest case.
//!
//! - `late_pe_joins_under_*`: 300 connections (more than the 256 handshake slots) hold the rendezvous, idle or
//!   trickling bytes, renewed when closed; the last PE starts 2 s late and the job still starts.
//! - `large_headers_under_an_address_space_limit`: the serving PE runs under `RLIMIT_AS` (`prlimit`); outsiders
//!   announce 1 GiB frames; nobody aborts and the job starts.
//! - `huge_job_size_is_an_error_naming_it`: a process with the key says the job has 2^40 PEs; it gets an error
//!   naming the value, and the serving PE goes on (the protocol refuses that HELLO like any other bad one: one
//!   misconfigured rank must not take the rendezvous of everyone down).
//! - `device_exchange_name_is_not_derived_from_the_host_one`: a squatter binds the device exchange's name as it
//!   used to follow from the host exchange's (cookie xor a constant), with PE 1's connects delayed by strace (so
//!   the old race is always won); the job still starts (ze-emu device heaps; skipped without ze-emu or strace).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use xpushmem::{BootstrapSpec, InitAttr, UniqueId};
use xpushmem_tests::{is_pe_of, CASE_VAR};

/// The role of a process of a test (`pe` or `rogue`).
const ROLE: &str = "BOOT_ROLE";
/// Hard limit of one test's job.
const JOB_LIMIT: Duration = Duration::from_secs(90);
/// Connections of a flood: more than the rendezvous' 256 handshake slots.
const FLOOD: usize = 300;

fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| panic!("{name} is set for this process"))
}

/// Write the unique ID where the others read it (whole or not at all).
fn publish_id(file: &Path, id: UniqueId) {
    xpushmem_tests::write_whole(file, id.to_string()).expect("publish the unique ID");
}

fn read_id(file: &Path) -> UniqueId {
    let start = Instant::now();
    loop {
        if let Ok(t) = std::fs::read_to_string(file) {
            return t.trim().parse().expect("a unique ID");
        }
        assert!(
            start.elapsed() < JOB_LIMIT,
            "the unique ID was never published"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// A process of a test: a PE (rank 0 makes and publishes the ID, optionally waits for a gate file before it
/// joins; the others may start late), or a rogue that joins with a job size of its own.
fn role_main() -> ! {
    let file = PathBuf::from(env("BOOT_ID_FILE"));
    let rank: usize = env("BOOT_RANK").parse().expect("rank");
    let size: usize = env("BOOT_SIZE").parse().expect("size");
    let r = (|| -> xpushmem::Result<()> {
        let uid = if rank == 0 && env(ROLE) == "pe" {
            let id = xpushmem::get_unique_id()?;
            publish_id(&file, id);
            id
        } else {
            read_id(&file)
        };
        if let Ok(gate) = std::env::var("BOOT_GATE") {
            while !Path::new(&gate).exists() {
                std::thread::sleep(Duration::from_millis(5));
            }
        }
        if let Ok(ms) = std::env::var("BOOT_DELAY_MS") {
            std::thread::sleep(Duration::from_millis(ms.parse().expect("delay")));
        }
        let sh = xpushmem::init_attr(InitAttr {
            bootstrap: BootstrapSpec::Uid { uid, rank, size },
            ..InitAttr::default()
        })?;
        let x = sh.calloc::<u64>(1)?.at(0)?;
        sh.p(x, sh.my_pe() as u64 + 1, (sh.my_pe() + 1) % sh.n_pes())?;
        sh.barrier_all()?;
        let from = (sh.my_pe() + sh.n_pes() - 1) % sh.n_pes();
        assert_eq!(sh.g(x, sh.my_pe())?, from as u64 + 1);
        sh.barrier_all()?;
        sh.finalize()
    })();
    match (env(ROLE).as_str(), r) {
        ("pe", Ok(())) => {
            println!("PE_OK {rank}");
            std::process::exit(0)
        }
        ("rogue", Err(e)) => {
            println!("ROGUE_REFUSED {e}");
            std::process::exit(0)
        }
        (_, Ok(())) => {
            println!("ROGUE_JOINED");
            std::process::exit(1)
        }
        (_, Err(e)) => {
            eprintln!("error: {e}");
            std::process::exit(1)
        }
    }
}

/// The processes of one test, their output in files of a scratch directory.
struct Procs {
    name: String,
    dir: PathBuf,
    kids: Vec<(String, Child)>,
}

impl Procs {
    fn new(name: &str) -> Procs {
        let dir = std::env::temp_dir().join(format!(
            "xpushmem-sboot-{}-{}",
            std::process::id(),
            name.replace("::", "-")
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("scratch dir");
        Procs {
            name: name.into(),
            dir,
            kids: Vec::new(),
        }
    }

    fn id_file(&self) -> PathBuf {
        self.dir.join("unique-id")
    }

    /// Start this test binary as `role` (`label` names its log), behind `wrapper` (e.g. `prlimit ...`).
    fn spawn(
        &mut self,
        label: &str,
        role: &str,
        rank: usize,
        size: u64,
        env: &[(&str, String)],
        wrapper: &[&str],
    ) {
        let exe = std::env::current_exe().expect("test binary");
        let mut cmd = match wrapper.split_first() {
            Some((w, rest)) => {
                let mut c = Command::new(w);
                c.args(rest).arg(&exe);
                c
            }
            None => Command::new(&exe),
        };
        let out = std::fs::File::create(self.dir.join(format!("{label}.log"))).expect("log");
        cmd.args([&self.name, "--exact", "--nocapture", "--test-threads=1"])
            .env(CASE_VAR, &self.name)
            .env(ROLE, role)
            .env("BOOT_ID_FILE", self.id_file())
            .env("BOOT_RANK", rank.to_string())
            .env("BOOT_SIZE", size.to_string())
            .env("XPUSHMEM_TIMEOUT_MS", "40000")
            .env("XPUSHMEM_SYMMETRIC_SIZE", "16M")
            .env("RUST_BACKTRACE", "0")
            .stdin(Stdio::null())
            .stdout(out.try_clone().expect("log"))
            .stderr(out);
        for (k, v) in env {
            cmd.env(k, v);
        }
        let child = cmd.spawn().expect("spawn a process of the test");
        self.kids.push((label.into(), child));
    }

    fn log(&self, label: &str) -> String {
        std::fs::read_to_string(self.dir.join(format!("{label}.log"))).unwrap_or_default()
    }

    fn logs(&self) -> String {
        self.kids
            .iter()
            .map(|(l, _)| format!("---- {l} ----\n{}", self.log(l)))
            .collect()
    }

    /// Wait for `label` to end (killing every process past the job's limit): its exit status.
    fn wait(&mut self, label: &str, start: Instant) -> std::process::ExitStatus {
        let i = self
            .kids
            .iter()
            .position(|(l, _)| l == label)
            .expect("known process");
        loop {
            if let Some(s) = self.kids[i].1.try_wait().expect("wait") {
                return s;
            }
            if start.elapsed() > JOB_LIMIT {
                self.kill_all();
                panic!(
                    "{} did not end within {JOB_LIMIT:?}\n{}",
                    label,
                    self.logs()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn kill_all(&mut self) {
        for (_, c) in &mut self.kids {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Every PE (`pe0`..) exited with 0 having said so; panics with every log otherwise.
    fn assert_pes_ok(&mut self, n: usize, start: Instant) {
        for pe in 0..n {
            let label = format!("pe{pe}");
            let s = self.wait(&label, start);
            let log = self.log(&label);
            if !s.success() || !log.contains(&format!("PE_OK {pe}")) {
                self.kill_all();
                panic!("{label} failed ({s:?})\n{}", self.logs());
            }
        }
    }
}

impl Drop for Procs {
    fn drop(&mut self) {
        self.kill_all();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// What the outsiders' connections do.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Attack {
    /// Send nothing.
    Idle,
    /// The campaign's slowloris: half announce a 1 GiB frame, half a frame of a HELLO's length; one byte per
    /// second each.
    Slowloris,
    /// A 4-byte header announcing 1 GiB, then nothing.
    BigHeader,
}

/// `n` outsider connections to `addr`, each renewed (once a second) when the server closes it, until the
/// returned flag is set. Returns once all are open.
fn attack(
    addr: SocketAddr,
    kind: Attack,
    n: usize,
) -> (Arc<AtomicBool>, std::thread::JoinHandle<usize>) {
    let stop = Arc::new(AtomicBool::new(false));
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let flag = stop.clone();
    let open = move |i: usize| -> Option<TcpStream> {
        let mut s = TcpStream::connect(addr).ok()?;
        s.set_nonblocking(true).ok()?;
        let head: u32 = match kind {
            Attack::Idle => return Some(s),
            Attack::Slowloris if i % 2 == 1 => 1 + 64 + 1, // a HELLO frame: kind + 64 bytes (plus one)
            Attack::Slowloris | Attack::BigHeader => 1 << 30,
        };
        s.write_all(&head.to_le_bytes()).ok()?;
        Some(s)
    };
    let t = std::thread::spawn(move || {
        let mut conns: Vec<Option<TcpStream>> = (0..n).map(open).collect();
        let _ = ready_tx.send(());
        let mut renewed = 0;
        let mut buf = [0u8; 4096];
        while !flag.load(Ordering::Relaxed) {
            for (i, c) in conns.iter_mut().enumerate() {
                let alive = c.as_mut().is_some_and(|s| {
                    // Drain what the server sent (its challenge); end of stream or an error: it closed us.
                    let readable = loop {
                        match s.read(&mut buf) {
                            Ok(0) => break false,
                            Ok(_) => continue,
                            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break true,
                            Err(_) => break false,
                        }
                    };
                    readable && (kind != Attack::Slowloris || s.write_all(&[1]).is_ok())
                });
                if !alive {
                    *c = open(i);
                    renewed += 1;
                }
            }
            for _ in 0..10 {
                if flag.load(Ordering::Relaxed) {
                    break;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        }
        renewed
    });
    ready_rx
        .recv()
        .expect("the attacker opened its connections");
    (stop, t)
}

/// A 4-PE job whose last PE starts 2 s after `n` outsider connections of `kind` took the rendezvous.
fn late_pe_under(name: &str, kind: Attack) {
    let mut p = Procs::new(name);
    let start = Instant::now();
    for pe in 0..3 {
        p.spawn(&format!("pe{pe}"), "pe", pe, 4, &[], &[]);
    }
    let id = read_id(&p.id_file());
    let (stop, attacker) = attack(id.addr, kind, FLOOD);
    p.spawn("pe3", "pe", 3, 4, &[("BOOT_DELAY_MS", "2000".into())], &[]);
    p.assert_pes_ok(4, start);
    stop.store(true, Ordering::Relaxed);
    let renewed = attacker.join().expect("attacker");
    eprintln!("{name}: the job started under {FLOOD} {kind:?} connections ({renewed} renewed)");
}

#[test]
fn late_pe_joins_under_an_idle_connection_flood() {
    let name: &str = &xpushmem_tests::test_name(
        module_path!(),
        "late_pe_joins_under_an_idle_connection_flood",
    );
    if is_pe_of(name) {
        role_main();
    }
    late_pe_under(name, Attack::Idle);
}

#[test]
fn late_pe_joins_under_a_slowloris() {
    let name: &str = &xpushmem_tests::test_name(module_path!(), "late_pe_joins_under_a_slowloris");
    if is_pe_of(name) {
        role_main();
    }
    late_pe_under(name, Attack::Slowloris);
}

#[test]
fn large_headers_under_an_address_space_limit() {
    let name: &str =
        &xpushmem_tests::test_name(module_path!(), "large_headers_under_an_address_space_limit");
    if is_pe_of(name) {
        role_main();
    }
    if Command::new("prlimit").arg("--version").output().is_err() {
        eprintln!("skipped {name}: no prlimit");
        return;
    }
    let mut p = Procs::new(name);
    let start = Instant::now();
    // The serving PE may map 2 GiB in all (it needs a few hundred MiB): a 1 GiB buffer fits once, not twice.
    let limit = format!("--as={}", 2u64 << 30);
    p.spawn("pe0", "pe", 0, 4, &[], &["prlimit", &limit, "--"]);
    let id = read_id(&p.id_file());
    let (stop, attacker) = attack(id.addr, Attack::BigHeader, 4);
    for pe in 1..4 {
        p.spawn(&format!("pe{pe}"), "pe", pe, 4, &[], &[]);
    }
    p.assert_pes_ok(4, start);
    stop.store(true, Ordering::Relaxed);
    attacker.join().expect("attacker");
}

#[test]
fn huge_job_size_is_an_error_naming_it() {
    let name: &str =
        &xpushmem_tests::test_name(module_path!(), "huge_job_size_is_an_error_naming_it");
    if is_pe_of(name) {
        role_main();
    }
    let mut p = Procs::new(name);
    let start = Instant::now();
    let gate = p.dir.join("gate");
    let gated = [("BOOT_GATE", gate.to_string_lossy().into_owned())];
    // PE 0 serves at once but joins only once the rogue is done, so the rogue's HELLO is the first.
    p.spawn("pe0", "pe", 0, 2, &gated, &[]);
    let huge = 1u64 << 40;
    p.spawn("rogue", "rogue", 1, huge, &[], &[]);
    let s = p.wait("rogue", start);
    let log = p.log("rogue");
    assert!(
        s.success() && log.contains("ROGUE_REFUSED") && log.contains(&huge.to_string()),
        "the rogue ({s:?}) was not refused with its size named\n{}",
        p.logs()
    );
    std::fs::write(&gate, b"go").expect("gate");
    p.spawn("pe1", "pe", 1, 2, &[], &[]);
    p.assert_pes_ok(2, start);
}

/// Names of xpushmem's abstract sockets in `/proc/net/unix` (without the leading `@`).
fn exchange_names() -> Vec<String> {
    std::fs::read_to_string("/proc/net/unix")
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split_whitespace().nth(7))
        .filter_map(|p| p.strip_prefix("@xpushmem."))
        .map(|n| format!("xpushmem.{n}"))
        .collect()
}

/// The device exchange's name as it used to follow from a host exchange's name `xpushmem.<cookie>.<leader>`:
/// the cookie xor "device". Applied to any name of the form `xpushmem.<hex>[.<leader>]` (the first 16 hex digits).
fn old_device_name(host: &str) -> Option<String> {
    let rest = host.strip_prefix("xpushmem.")?;
    let (hex, leader) = rest.split_once('.').unwrap_or((rest, "0"));
    let cookie = u64::from_str_radix(hex.get(..16)?, 16).ok()?;
    Some(format!(
        "xpushmem.{:016x}.{leader}",
        cookie ^ 0x6465_7669_6365_0000
    ))
}

#[test]
fn device_exchange_name_is_not_derived_from_the_host_one() {
    let name: &str = &xpushmem_tests::test_name(
        module_path!(),
        "device_exchange_name_is_not_derived_from_the_host_one",
    );
    if is_pe_of(name) {
        role_main();
    }
    let device = xpushmem_tests::device_env();
    if !device.iter().any(|(k, _)| k == "ZE_ENABLE_ALT_DRIVERS")
        && std::env::var("XPUSHMEM_HARDWARE").is_err()
    {
        eprintln!("skipped {name}: no ze-emu driver (source scripts/device-env.sh)");
        return;
    }
    let env: Vec<(&str, String)> = device
        .iter()
        .map(|(k, v)| (k.as_str(), v.clone()))
        .collect();
    if Command::new("strace").arg("-V").output().is_err() {
        eprintln!("skipped {name}: no strace (it widens the window the old race needed)");
        return;
    }
    assert!(
        squat_device_exchange(name, &env),
        "the squatter never saw the host exchange's name"
    );
}

/// The squat of [`device_exchange_name_is_not_derived_from_the_host_one`]: whether the squatter saw the host
/// exchange's name (and then the PEs succeeded: it panics otherwise).
fn squat_device_exchange(name: &str, env: &[(&str, String)]) -> bool {
    let before = exchange_names();
    let mut p = Procs::new(name);
    let start = Instant::now();
    p.spawn("pe0", "pe", 0, 2, env, &[]);
    // PE 1's connects are delayed by 1.5 s each (strace's fault injection, as the campaign did): PE 0 holds its
    // host exchange bound that long, and the squatter sees it every time. Then the squatter binds the name the
    // device exchange used to have (the host cookie xor "device"), before PE 0 gets to bind its device exchange.
    let delay = [
        "strace",
        "-f",
        "-qq",
        "-o",
        "/dev/null",
        "-e",
        "trace=connect",
        "-e",
        "inject=connect:delay_enter=1500000",
    ];
    p.spawn("pe1", "pe", 1, 2, env, &delay);
    let mut squat = None;
    while start.elapsed() < JOB_LIMIT
        && p.kids
            .iter_mut()
            .all(|(_, c)| c.try_wait().ok().flatten().is_none())
    {
        let seen: Vec<String> = exchange_names()
            .into_iter()
            .filter(|n| !before.contains(n))
            .collect();
        if let Some(host) = seen.first() {
            let target =
                old_device_name(host).expect("an exchange name of the form xpushmem.<hex>...");
            let sock = rustix::net::socket(
                rustix::net::AddressFamily::UNIX,
                rustix::net::SocketType::SEQPACKET,
                None,
            )
            .expect("socket");
            let addr =
                rustix::net::SocketAddrUnix::new_abstract_name(target.as_bytes()).expect("name");
            rustix::net::bind(&sock, &addr).expect("squat the old device name");
            rustix::net::listen(&sock, 16).expect("listen");
            eprintln!("squatter saw @{host}, holds @{target}");
            squat = Some(sock);
            break;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    p.assert_pes_ok(2, start);
    squat.is_some()
}
