//! Test harness for ze-emu: every test re-executes this test binary as a child process with the loader
//! environment set (`ZE_ENABLE_ALT_DRIVERS` = the built `libze_emu.so`, validation layer on), so the tests do
//! not depend on the outer environment and each case gets a fresh loader.
#![allow(dead_code)]
// `ze!` deliberately passes caller expressions (often deliberately invalid arguments) into the FFI call.
#![allow(clippy::macro_metavars_in_unsafe)]

pub use level_zero_sys::*;
use std::ffi::c_void;
use std::process::Command;

/// Calls a loader entry point: `ze!(env, zeFoo(a, b))`.
#[macro_export]
macro_rules! ze {
    ($env:expr, $f:ident ( $($a:expr),* $(,)? )) => {
        // SAFETY: test code passes valid (or deliberately invalid but non-dangling) arguments; invalid ones are
        // what the driver/validation layer must reject.
        unsafe { ($env.ze.$f)($($a),*) }
    };
}

/// Asserts a call's result.
#[macro_export]
macro_rules! ze_ok {
    ($env:expr, $f:ident ( $($a:expr),* $(,)? )) => {{
        let r = $crate::ze!($env, $f($($a),*));
        assert_eq!(r, ZE_RESULT_SUCCESS, "{} failed: {}", stringify!($f), r);
    }};
}

const CASE_ENV: &str = "ZE_EMU_TEST_CASE";

#[allow(unused_imports)]
pub use ze_emu::testing::{emu_lib, opencl_env, repo_root};

/// Options of a child run.
#[derive(Default, Clone)]
pub struct Opts {
    /// `XPUSHMEM_EMU_DEVICES` (unset if None).
    pub devices: Option<String>,
    /// Extra environment.
    pub env: Vec<(String, String)>,
    /// Expect the child to fail (exit non-zero).
    pub expect_failure: bool,
}

/// Whether this process is the child for `name`.
pub fn is_child(name: &str) -> bool {
    std::env::var(CASE_ENV).is_ok_and(|v| v == name)
}

/// Builds the child command for test `name` (same binary, exact filter) with the loader environment.
pub fn child_command(name: &str, opts: &Opts) -> Command {
    let exe = std::env::current_exe().expect("current_exe");
    let mut cmd = Command::new(exe);
    cmd.args([name, "--exact", "--nocapture", "--test-threads=1"]);
    for (k, _) in std::env::vars_os() {
        let k = k.to_string_lossy().to_string();
        if k.starts_with("ZE_")
            || k.starts_with("ZET_")
            || k.starts_with("ZES_")
            || k == "XPUSHMEM_EMU_DEVICES"
        {
            cmd.env_remove(&k);
        }
    }
    cmd.env(CASE_ENV, name)
        .env("ZE_ENABLE_ALT_DRIVERS", emu_lib())
        .env(ze_emu::testing::LIB_ENV, emu_lib())
        .env("ZE_ENABLE_VALIDATION_LAYER", "1")
        .env("ZE_ENABLE_PARAMETER_VALIDATION", "1")
        .env("RUST_BACKTRACE", "1");
    if let Some((ocl, ld)) = opencl_env() {
        cmd.env("OCL_ICD_FILENAMES", ocl).env("LD_LIBRARY_PATH", ld);
    }
    if let Some(d) = &opts.devices {
        cmd.env("XPUSHMEM_EMU_DEVICES", d);
    }
    for (k, v) in &opts.env {
        cmd.env(k, v);
    }
    cmd
}

/// Runs `body` in a child process (this function is called from the `#[test]` in both processes).
pub fn run(name: &str, opts: Opts, body: impl FnOnce()) {
    if is_child(name) {
        body();
        return;
    }
    let out = child_command(name, &opts).output().expect("spawn child");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    for l in stdout.lines().chain(stderr.lines()) {
        println!("[child {name}] {l}");
    }
    if opts.expect_failure {
        assert!(!out.status.success(), "child {name} was expected to fail");
    } else {
        assert!(out.status.success(), "child {name} failed: {}", out.status);
        assert!(stdout.contains("1 passed"), "child {name} ran no test");
    }
}

/// A loaded, initialised Level Zero with the ze-emu driver, and a context.
pub struct Env {
    /// Entry points.
    pub ze: ZeApi,
    /// The driver.
    pub driver: ze_driver_handle_t,
    /// Its devices.
    pub devices: Vec<ze_device_handle_t>,
    /// A context.
    pub ctx: ze_context_handle_t,
}

impl Env {
    /// Loads the loader, `zeInit`, picks the (only) driver, creates a context.
    pub fn new() -> Env {
        let ze = ZeApi::load().expect("Level Zero loader (run scripts/setup-device.sh)");
        let mut env = Env {
            ze,
            driver: ze_driver_handle_t::null(),
            devices: Vec::new(),
            ctx: ze_context_handle_t::null(),
        };
        ze_ok!(env, zeInit(ZE_INIT_FLAG_GPU_ONLY));
        let mut n = 0u32;
        ze_ok!(env, zeDriverGet(&mut n, std::ptr::null_mut()));
        assert_eq!(n, 1, "exactly one driver (ze-emu)");
        ze_ok!(env, zeDriverGet(&mut n, &mut env.driver));
        let mut nd = 0u32;
        ze_ok!(env, zeDeviceGet(env.driver, &mut nd, std::ptr::null_mut()));
        env.devices = vec![ze_device_handle_t::null(); nd as usize];
        ze_ok!(
            env,
            zeDeviceGet(env.driver, &mut nd, env.devices.as_mut_ptr())
        );
        let desc = ze_context_desc_t::default();
        ze_ok!(env, zeContextCreate(env.driver, &desc, &mut env.ctx));
        env
    }

    /// First device.
    pub fn dev(&self) -> ze_device_handle_t {
        self.devices[0]
    }

    /// Device allocation.
    pub fn alloc_device(&self, size: usize) -> *mut u8 {
        let desc = ze_device_mem_alloc_desc_t::default();
        let mut p: *mut c_void = std::ptr::null_mut();
        ze_ok!(
            self,
            zeMemAllocDevice(self.ctx, &desc, size, 64, self.dev(), &mut p)
        );
        p.cast()
    }

    /// Immediate command list on group `ordinal`.
    pub fn immediate(
        &self,
        ordinal: u32,
        mode: ze_command_queue_mode_t,
    ) -> ze_command_list_handle_t {
        self.immediate_on(ordinal, 0, mode)
    }

    /// Immediate command list on engine `index` of group `ordinal`.
    pub fn immediate_on(
        &self,
        ordinal: u32,
        index: u32,
        mode: ze_command_queue_mode_t,
    ) -> ze_command_list_handle_t {
        let desc = ze_command_queue_desc_t {
            ordinal,
            index,
            mode,
            ..Default::default()
        };
        let mut l = ze_command_list_handle_t::null();
        ze_ok!(
            self,
            zeCommandListCreateImmediate(self.ctx, self.dev(), &desc, &mut l)
        );
        l
    }

    /// Host-visible event pool with `n` events, and the events.
    pub fn events(&self, n: u32) -> (ze_event_pool_handle_t, Vec<ze_event_handle_t>) {
        let pd = ze_event_pool_desc_t {
            flags: ZE_EVENT_POOL_FLAG_HOST_VISIBLE,
            count: n,
            ..Default::default()
        };
        let mut pool = ze_event_pool_handle_t::null();
        ze_ok!(
            self,
            zeEventPoolCreate(self.ctx, &pd, 0, std::ptr::null_mut(), &mut pool)
        );
        let evs = (0..n)
            .map(|i| {
                let ed = ze_event_desc_t {
                    index: i,
                    signal: ZE_EVENT_SCOPE_FLAG_HOST,
                    wait: ZE_EVENT_SCOPE_FLAG_HOST,
                    ..Default::default()
                };
                let mut e = ze_event_handle_t::null();
                ze_ok!(self, zeEventCreate(pool, &ed, &mut e));
                e
            })
            .collect();
        (pool, evs)
    }
}

/// Declares a test whose body runs in a child process with a fresh [`Env`].
#[macro_export]
macro_rules! emu_test {
    ($(#[$m:meta])* $name:ident, $opts:expr, |$env:ident| $body:block) => {
        $(#[$m])*
        #[test]
        fn $name() {
            $crate::common::run(stringify!($name), $opts, || {
                #[allow(unused_variables)]
                let $env = $crate::common::Env::new();
                $body
            });
        }
    };
    ($(#[$m:meta])* $name:ident, |$env:ident| $body:block) => {
        $crate::emu_test!($(#[$m])* $name, $crate::common::Opts::default(), |$env| $body);
    };
}
