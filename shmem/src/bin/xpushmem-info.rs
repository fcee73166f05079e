//! `xpushmem-info`: version, build features, every `XPUSHMEM_*` (and OpenSHMEM `SHMEM_*`) variable with its value and default, and what this
//! platform offers.

use xpushmem::config::Config;

fn yes(b: bool) -> &'static str {
    if b {
        "yes"
    } else {
        "no"
    }
}

fn main() {
    println!("xpushmem {}", xpushmem::VERSION);
    let features: Vec<&str> = [("mpi", cfg!(feature = "mpi"))]
        .iter()
        .filter(|f| f.1)
        .map(|f| f.0)
        .collect();
    println!(
        "build features: {}",
        if features.is_empty() {
            "(none)".into()
        } else {
            features.join(", ")
        }
    );
    println!();
    println!("environment (XPUSHMEM_*, and the OpenSHMEM layer's SHMEM_*):");
    print!("{}", Config::describe());
    // What init would refuse: the runtime's variables, then the OpenSHMEM layer's (checked by its shmem_init).
    match Config::from_env().and_then(|mut c| c.apply_openshmem()) {
        Ok(()) => {}
        Err(e) => println!("  !! {e}"),
    }
    println!();
    println!("platform:");
    println!(
        "  cores online: {}",
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
    );
    let memfd = rustix::fs::memfd_create("xpushmem-probe", rustix::fs::MemfdFlags::CLOEXEC).is_ok();
    println!("  memfd (host heaps): {}", yes(memfd));
    let pidfd = rustix::process::pidfd_open(
        rustix::process::getpid(),
        rustix::process::PidfdFlags::empty(),
    )
    .is_ok();
    println!("  pidfd (peer-loss detection): {}", yes(pidfd));
    let mut dirs: Vec<std::path::PathBuf> = std::env::var("LD_LIBRARY_PATH")
        .unwrap_or_default()
        .split(':')
        .filter(|d| !d.is_empty())
        .map(Into::into)
        .collect();
    dirs.extend(
        [
            "/usr/lib/x86_64-linux-gnu",
            "/usr/lib64",
            "/usr/lib",
            "/usr/local/lib",
        ]
        .map(Into::into),
    );
    let ze = dirs
        .iter()
        .map(|d| d.join("libze_loader.so.1"))
        .find(|p| p.exists())
        .map(|p| p.display().to_string());
    println!(
        "  Level Zero loader: {}",
        ze.as_deref()
            .unwrap_or("not found (device heaps unavailable; host heaps work)")
    );
    if ze.is_some() {
        match xpushmem::transport::ze::ZeRuntime::device_count() {
            Ok(n) => println!(
                "  Level Zero devices: {n} (XPUSHMEM_HEAP=device puts the symmetric heap on them)"
            ),
            Err(e) => println!("  Level Zero devices: none usable ({e})"),
        }
    }
    let ze_devices =
        ze.is_some() && xpushmem::transport::ze::ZeRuntime::device_count().is_ok_and(|n| n > 0);
    println!(
        "  heaps: host (memfd, this node){}",
        if ze_devices {
            ", device (Level Zero)"
        } else {
            ""
        }
    );
    println!(
        "  transports: shm (same node), ze (device heaps: copy engines, IPC){}",
        match xpushmem::transport::fabric_providers() {
            Ok(Some(_)) | Err(_) => ", fabric (other nodes: libfabric)",
            Ok(None) => "",
        }
    );
    match xpushmem::transport::fabric_providers() {
        Ok(None) => println!(
            "  fabric: not built (libfabric headers missing at build time; install libfabric-dev)"
        ),
        Ok(Some(list)) if list.is_empty() => {
            println!(
                "  fabric providers: none with reliable datagrams, RMA and atomics (see fi_info)"
            )
        }
        Ok(Some(list)) => {
            // One line per provider, in libfabric's order of preference, with the domains (interfaces) it offers.
            let mut provs: Vec<(String, Vec<String>)> = Vec::new();
            for (prov, domain, fabric) in list {
                let d = format!("{domain} ({fabric})");
                match provs.iter_mut().find(|(p, _)| *p == prov) {
                    Some((_, ds)) if !ds.contains(&d) => ds.push(d),
                    Some(_) => {}
                    None => provs.push((prov, vec![d])),
                }
            }
            for (prov, domains) in provs {
                println!("  fabric provider: {prov}: {}", domains.join(", "));
            }
        }
        Err(e) => println!("  fabric providers: {e}"),
    }
    let exe = std::env::current_exe().ok();
    let libs = xpushmem::device::library::find(exe.as_deref());
    if libs.is_empty() {
        println!(
            "  device library: {} not found (installed by ffi/install.sh under PREFIX/lib/xpushmem)",
            xpushmem::device::library::bitcode_name()
        );
    }
    for lib in libs {
        println!(
            "  device library: {} (version {}, device ABI {})",
            lib.display(),
            xpushmem::VERSION,
            xpushmem::abi::XPUSHMEM_DEVICE_ABI_VERSION
        );
    }
}
