//! Modules (SPIR-V built by Intel's OpenCL CPU runtime), build logs, kernels and kernel launches.

use crate::objects::{context, device, Context, Device, MAX_GROUP_SIZE};
use crate::ocl::{self, cl_command_queue, cl_kernel, cl_program, CL_PROGRAM_BUILD_LOG, CL_SUCCESS};
use crate::progcache;
use crate::registry::Registry;
use crate::spirv::{self, ArgKind, KernelInfo};
use crate::util::*;
use level_zero_sys::*;
use once_cell::sync::Lazy;
use std::ffi::{c_char, c_void, CStr, CString};
use std::sync::{Arc, Mutex};

/// Live modules.
pub static MODULES: Lazy<Registry<Module>> = Lazy::new(Registry::default);
/// Live build logs.
pub static BUILD_LOGS: Lazy<Registry<BuildLog>> = Lazy::new(Registry::default);
/// Live kernels.
pub static KERNELS: Lazy<Registry<Kernel>> = Lazy::new(Registry::default);

/// A built module.
pub struct Module {
    /// Context.
    pub ctx: Arc<Context>,
    /// Device.
    pub device: Arc<Device>,
    program: cl_program,
    kernels: Vec<KernelInfo>,
    names: Vec<CString>,
}
// SAFETY: cl_program is a thread-safe OpenCL object.
unsafe impl Send for Module {}
// SAFETY: as above.
unsafe impl Sync for Module {}
impl Drop for Module {
    fn drop(&mut self) {
        if let Ok(o) = ocl::get() {
            // SAFETY: the program was created by us and is released once.
            unsafe { (o.release_program)(self.program) };
        }
    }
}

/// A module build log.
pub struct BuildLog {
    text: CString,
}

#[derive(Clone, Debug)]
enum ArgValue {
    Bytes(Vec<u8>),
    Ptr(usize),
    Local(usize),
}

/// A kernel.
pub struct Kernel {
    module: Arc<Module>,
    info: KernelInfo,
    name: CString,
    cl: Mutex<cl_kernel>,
    args: Mutex<Vec<Option<ArgValue>>>,
    group: Mutex<[u32; 3]>,
}
// SAFETY: the cl_kernel is only used under its mutex (OpenCL forbids concurrent clSetKernelArg on one kernel).
unsafe impl Send for Kernel {}
// SAFETY: as above.
unsafe impl Sync for Kernel {}
impl Drop for Kernel {
    fn drop(&mut self) {
        if let Ok(o) = ocl::get() {
            // SAFETY: created by us, released once.
            unsafe { (o.release_kernel)(*lock(&self.cl)) };
        }
    }
}

/// A kernel launch with arguments and sizes captured at append time.
pub struct Launch {
    kernel: Arc<Kernel>,
    args: Vec<ArgValue>,
    group: [u32; 3],
    count: [u32; 3],
}

/// Per-worker-thread OpenCL queue.
#[derive(Default)]
pub struct Worker {
    queue: Option<SendQueue>,
    /// Whether this worker serves a queue of a compute engine other than the first (index 1 and up): its kernels
    /// run on the second engine's OpenCL device (`Ocl::engine`).
    engine: bool,
}

impl Worker {
    /// A worker of the first compute engine, or (`engine`) of another one.
    pub fn on_engine(engine: bool) -> Self {
        Self {
            queue: None,
            engine,
        }
    }
}

struct SendQueue(cl_command_queue);
impl Drop for SendQueue {
    fn drop(&mut self) {
        if let Ok(o) = ocl::get() {
            // SAFETY: created by this worker, released once.
            unsafe { (o.release_queue)(self.0) };
        }
    }
}

impl Kernel {
    /// The module the kernel was created from.
    pub fn module(&self) -> &Arc<Module> {
        &self.module
    }
}

/// Resolves a kernel handle.
pub fn kernel(h: ze_kernel_handle_t) -> ZeResult<Arc<Kernel>> {
    KERNELS.get(h.0)
}

/// Captures a launch: every argument must have been set.
pub fn snapshot(k: &Arc<Kernel>, gc: ze_group_count_t) -> ZeResult<Launch> {
    let args = lock(&k.args);
    let mut vals = Vec::with_capacity(args.len());
    for (i, a) in args.iter().enumerate() {
        vals.push(a.clone().ok_or_else(|| {
            fail(
                ZE_RESULT_ERROR_INVALID_ARGUMENT,
                format_args!("kernel {}: argument {i} was never set", k.info.name),
            )
        })?);
    }
    let group = *lock(&k.group);
    for (c, g) in [gc.groupCountX, gc.groupCountY, gc.groupCountZ]
        .iter()
        .zip(group)
    {
        (*c as usize)
            .checked_mul(g as usize)
            .ok_or(ZE_RESULT_ERROR_INVALID_ARGUMENT)?;
    }
    Ok(Launch {
        kernel: k.clone(),
        args: vals,
        group,
        count: [gc.groupCountX, gc.groupCountY, gc.groupCountZ],
    })
}

/// Runs a launch on the worker's OpenCL queue and waits for it.
pub fn run_launch(l: &Launch, w: &mut Worker) -> Result<(), String> {
    if l.count.contains(&0) {
        return Ok(());
    }
    let o = ocl::get().map_err(str::to_string)?;
    if w.queue.is_none() {
        let mut err = 0;
        let device = if w.engine { o.engine } else { o.device };
        // SAFETY: valid context and one of its devices; default properties.
        let q = unsafe { (o.create_queue)(o.context, device, std::ptr::null(), &mut err) };
        if err != CL_SUCCESS || q.is_null() {
            return Err(format!("clCreateCommandQueueWithProperties = {err}"));
        }
        w.queue = Some(SendQueue(q));
    }
    let q = w.queue.as_ref().map(|q| q.0).expect("created above");
    let global: Vec<usize> = (0..3)
        .map(|d| l.count[d] as usize * l.group[d] as usize)
        .collect();
    let local: Vec<usize> = l.group.iter().map(|g| *g as usize).collect();
    {
        let k = lock(&l.kernel.cl);
        for (i, a) in l.args.iter().enumerate() {
            let r = match a {
                // SAFETY: bytes of the exact argument size (checked at set time).
                ArgValue::Bytes(b) => unsafe { (o.set_kernel_arg)(*k, i as u32, b.len(), b.as_ptr().cast()) },
                // SAFETY: local memory argument: size only.
                ArgValue::Local(n) => unsafe { (o.set_kernel_arg)(*k, i as u32, *n, std::ptr::null()) },
                ArgValue::Ptr(p) => match o.set_kernel_arg_mem_pointer {
                    // SAFETY: USM/system pointer value for a pointer parameter (shared system USM).
                    Some(f) => unsafe { f(*k, i as u32, *p as *const c_void) },
                    None => return Err("pointer arguments need cl_intel_unified_shared_memory (clSetKernelArgMemPointerINTEL)".into()),
                },
            };
            if r != CL_SUCCESS {
                return Err(format!(
                    "kernel {}: setting argument {i} failed ({r})",
                    l.kernel.info.name
                ));
            }
        }
        // SAFETY: valid queue and kernel, 3 dimensions with matching arrays.
        let r = unsafe {
            (o.enqueue_nd_range)(
                q,
                *k,
                3,
                std::ptr::null(),
                global.as_ptr(),
                local.as_ptr(),
                0,
                std::ptr::null(),
                std::ptr::null_mut(),
            )
        };
        if r != CL_SUCCESS {
            return Err(format!(
                "kernel {}: clEnqueueNDRangeKernel = {r} (global {global:?}, local {local:?})",
                l.kernel.info.name
            ));
        }
    }
    // SAFETY: valid queue.
    let r = unsafe { (o.finish)(q) };
    if r != CL_SUCCESS {
        return Err(format!("clFinish = {r}"));
    }
    Ok(())
}

/// Translates Level Zero build flags to OpenCL ones.
fn translate_flags(flags: &str) -> Result<String, String> {
    let mut out = Vec::new();
    for f in flags.split_whitespace() {
        match f {
            "-ze-opt-disable" => out.push("-cl-opt-disable".to_string()),
            "-ze-take-global-address"
            | "-ze-opt-greater-than-4GB-buffer-required"
            | "-ze-opt-large-register-file" => {}
            f if f.starts_with("-ze-opt-level=") => {}
            f if f.starts_with("-ze-") => return Err(format!("unsupported build flag {f}")),
            f => out.push(f.to_string()),
        }
    }
    Ok(out.join(" "))
}

fn make_log(ph: *mut ze_module_build_log_handle_t, text: &str) {
    if !ph.is_null() {
        let log = Arc::new(BuildLog {
            text: CString::new(text.replace('\0', " ")).expect("no NUL"),
        });
        // SAFETY: caller's optional output pointer, non-null.
        unsafe { *ph = ze_module_build_log_handle_t(BUILD_LOGS.insert(log)) };
    }
}

pub(crate) unsafe extern "C" fn module_create(
    hctx: ze_context_handle_t,
    hdev: ze_device_handle_t,
    desc: *const ze_module_desc_t,
    ph: *mut ze_module_handle_t,
    phlog: *mut ze_module_build_log_handle_t,
) -> ze_result_t {
    entry(|| {
        let ctx = context(hctx)?;
        let dev = device(hdev)?;
        // SAFETY: caller's descriptor.
        let d = unsafe { read_desc(desc, &[])? };
        nn_mut(ph)?;
        if !phlog.is_null() {
            // SAFETY: optional output, non-null.
            unsafe { *phlog = ze_module_build_log_handle_t::null() };
        }
        match d.format {
            ZE_MODULE_FORMAT_IL_SPIRV => {}
            ZE_MODULE_FORMAT_NATIVE => {
                make_log(phlog, "ze-emu accepts only SPIR-V modules");
                return Err(ZE_RESULT_ERROR_INVALID_NATIVE_BINARY);
            }
            _ => return Err(ZE_RESULT_ERROR_INVALID_ENUMERATION),
        }
        nn(d.pInputModule)?;
        if d.inputSize == 0 {
            return Err(ZE_RESULT_ERROR_INVALID_SIZE);
        }
        if !d.pConstants.is_null() {
            // SAFETY: non-null caller structure.
            let c = unsafe { *d.pConstants };
            if c.numConstants > 0 {
                return Err(fail(
                    ZE_RESULT_ERROR_UNSUPPORTED_FEATURE,
                    "specialization constants are not supported by ze-emu",
                ));
            }
        }
        let flags = if d.pBuildFlags.is_null() {
            String::new()
        } else {
            // SAFETY: non-null NUL-terminated caller string.
            unsafe { CStr::from_ptr(d.pBuildFlags) }
                .to_string_lossy()
                .into_owned()
        };
        // SAFETY: the caller provides inputSize readable bytes.
        let il = unsafe { std::slice::from_raw_parts(d.pInputModule, d.inputSize) };
        // What the GPU driver takes and the CPU runtime rejects (Triton's KernelAttributesINTEL) is removed.
        let il = match spirv::for_cpu_runtime(il) {
            Ok(il) => il,
            Err(e) => {
                make_log(phlog, &e);
                return Err(fail(ZE_RESULT_ERROR_MODULE_BUILD_FAILURE, e));
            }
        };
        let il = &*il;
        let kernels = match spirv::parse(il) {
            Ok(k) => k,
            Err(e) => {
                make_log(phlog, &e);
                return Err(fail(ZE_RESULT_ERROR_MODULE_BUILD_FAILURE, e));
            }
        };
        let cl_flags = match translate_flags(&flags) {
            Ok(f) => CString::new(f).map_err(|_| ZE_RESULT_ERROR_INVALID_ARGUMENT)?,
            Err(e) => {
                make_log(phlog, &e);
                return Err(fail(ZE_RESULT_ERROR_MODULE_BUILD_FAILURE, e));
            }
        };
        let o = match ocl::get() {
            Ok(o) => o,
            Err(e) => {
                let msg = format!("OpenCL runtime unavailable: {e}");
                make_log(phlog, &msg);
                return Err(fail(ZE_RESULT_ERROR_DEPENDENCY_UNAVAILABLE, msg));
            }
        };
        // The compiled program from the cache (progcache.rs) when it has this SPIR-V, options and runtime.
        let cache = progcache::dir().map(|dir| (progcache::key(o, il, &cl_flags), dir));
        let from_cache = || {
            cache.as_ref().and_then(|(key, dir)| {
                progcache::load(dir, key)
                    .and_then(|bin| progcache::program_from(o, &bin, &cl_flags))
            })
        };
        // On a miss, one process compiles while the others building the same module wait for its entry (the
        // PEs of a job all load the same modules at once).
        let mut _compiling = None;
        let cached = from_cache().or_else(|| {
            let (key, dir) = cache.as_ref()?;
            _compiling = progcache::CompileLock::acquire(dir, key);
            from_cache()
        });
        let (prog, r) = match cached {
            Some(prog) => (prog, CL_SUCCESS),
            None => {
                let mut err = 0;
                // SAFETY: valid context; IL buffer of the given size.
                let prog = unsafe {
                    (o.create_program_with_il)(o.context, il.as_ptr().cast(), il.len(), &mut err)
                };
                if err != CL_SUCCESS || prog.is_null() {
                    let msg = format!("clCreateProgramWithIL = {err}");
                    make_log(phlog, &msg);
                    return Err(fail(ZE_RESULT_ERROR_MODULE_BUILD_FAILURE, msg));
                }
                // SAFETY: valid program and device; NUL-terminated options; no callback.
                let r = unsafe {
                    (o.build_program)(
                        prog,
                        1,
                        &o.device,
                        cl_flags.as_ptr(),
                        std::ptr::null(),
                        std::ptr::null_mut(),
                    )
                };
                if r == CL_SUCCESS {
                    if let (Some((key, dir)), Some(bin)) = (&cache, progcache::binary_of(o, prog)) {
                        progcache::store(dir, key, &bin);
                    }
                }
                (prog, r)
            }
        };
        let mut n = 0usize;
        // SAFETY: size query.
        unsafe {
            (o.get_program_build_info)(
                prog,
                o.device,
                CL_PROGRAM_BUILD_LOG,
                0,
                std::ptr::null_mut(),
                &mut n,
            )
        };
        let mut buf = vec![0u8; n.max(1)];
        // SAFETY: buffer of the reported size.
        unsafe {
            (o.get_program_build_info)(
                prog,
                o.device,
                CL_PROGRAM_BUILD_LOG,
                buf.len(),
                buf.as_mut_ptr().cast(),
                std::ptr::null_mut(),
            )
        };
        let log = String::from_utf8_lossy(&buf)
            .trim_end_matches('\0')
            .to_string();
        make_log(phlog, &log);
        if r != CL_SUCCESS {
            // SAFETY: created above, released once.
            unsafe { (o.release_program)(prog) };
            return Err(fail(
                ZE_RESULT_ERROR_MODULE_BUILD_FAILURE,
                format_args!("clBuildProgram on {} = {r}: {log}", o.description),
            ));
        }
        let names = kernels
            .iter()
            .map(|k| CString::new(k.name.clone()).expect("no NUL"))
            .collect();
        let m = Arc::new(Module {
            ctx,
            device: dev,
            program: prog,
            kernels,
            names,
        });
        // SAFETY: checked non-null.
        unsafe { out(ph, ze_module_handle_t(MODULES.insert(m))) }
    })
}

pub(crate) unsafe extern "C" fn module_destroy(h: ze_module_handle_t) -> ze_result_t {
    entry(|| {
        MODULES
            .remove_if(h.0, |m| {
                if KERNELS.any(|k| Arc::ptr_eq(&k.module, m)) {
                    Err(fail(
                        ZE_RESULT_ERROR_HANDLE_OBJECT_IN_USE,
                        "zeModuleDestroy: kernels of the module are still alive",
                    ))
                } else {
                    Ok(())
                }
            })
            .map(|_| ())
    })
}

pub(crate) unsafe extern "C" fn module_get_global_pointer(
    h: ze_module_handle_t,
    name: *const c_char,
    psize: *mut usize,
    pptr: *mut *mut c_void,
) -> ze_result_t {
    entry(|| {
        let m = MODULES.get(h.0)?;
        nn(name)?;
        let o = ocl::get().map_err(|e| fail(ZE_RESULT_ERROR_DEPENDENCY_UNAVAILABLE, e))?;
        let f = o.get_global_variable_pointer.ok_or_else(|| {
            fail(ZE_RESULT_ERROR_UNSUPPORTED_FEATURE, "zeModuleGetGlobalPointer: the OpenCL runtime lacks clGetDeviceGlobalVariablePointerINTEL")
        })?;
        let (mut size, mut ptr) = (0usize, std::ptr::null_mut());
        // SAFETY: valid device/program, NUL-terminated name, valid out pointers.
        let r = unsafe { f(o.device, m.program, name, &mut size, &mut ptr) };
        if r != CL_SUCCESS || ptr.is_null() {
            // A missing global is an answer, not a failure: callers probe for optional globals (the runtime asks
            // every module for the device library's state), and Intel's driver returns the code without a word.
            return Err(ZE_RESULT_ERROR_INVALID_GLOBAL_NAME);
        }
        if !psize.is_null() {
            // SAFETY: optional output, non-null.
            unsafe { *psize = size };
        }
        if !pptr.is_null() {
            // SAFETY: optional output, non-null.
            unsafe { *pptr = ptr };
        }
        Ok(())
    })
}

pub(crate) unsafe extern "C" fn module_get_kernel_names(
    h: ze_module_handle_t,
    pcount: *mut u32,
    pnames: *mut *const c_char,
) -> ze_result_t {
    entry(|| {
        let m = MODULES.get(h.0)?;
        let ptrs: Vec<*const c_char> = m.names.iter().map(|n| n.as_ptr()).collect();
        // SAFETY: caller's pointers, checked inside; names live as long as the module.
        unsafe { crate::driver::counted(pcount, pnames, &ptrs) }
    })
}

/// Copies a C string per the "pSize, then buffer" protocol.
///
/// # Safety
/// `psize` readable/writable if non-null; `buf` null or valid for `*psize` bytes.
unsafe fn string_out(s: &CStr, psize: *mut usize, buf: *mut c_char) -> ZeResult {
    let psize = nn_mut(psize)?;
    let bytes = s.to_bytes_with_nul();
    if buf.is_null() {
        // SAFETY: non-null.
        unsafe { *psize = bytes.len() };
        return Ok(());
    }
    // SAFETY: non-null.
    let cap = unsafe { *psize };
    if cap == 0 {
        return Err(ZE_RESULT_ERROR_INVALID_SIZE);
    }
    let n = bytes.len().min(cap);
    // SAFETY: the caller's buffer holds `cap >= n` bytes.
    unsafe {
        std::ptr::copy_nonoverlapping(bytes.as_ptr().cast(), buf, n);
        *buf.add(n - 1) = 0;
        *psize = n;
    }
    Ok(())
}

pub(crate) unsafe extern "C" fn build_log_destroy(h: ze_module_build_log_handle_t) -> ze_result_t {
    entry(|| BUILD_LOGS.remove_if(h.0, |_| Ok(())).map(|_| ()))
}

pub(crate) unsafe extern "C" fn build_log_get_string(
    h: ze_module_build_log_handle_t,
    psize: *mut usize,
    buf: *mut c_char,
) -> ze_result_t {
    entry(|| {
        let l = BUILD_LOGS.get(h.0)?;
        // SAFETY: caller's pointers.
        unsafe { string_out(&l.text, psize, buf) }
    })
}

pub(crate) unsafe extern "C" fn kernel_create(
    hm: ze_module_handle_t,
    desc: *const ze_kernel_desc_t,
    ph: *mut ze_kernel_handle_t,
) -> ze_result_t {
    entry(|| {
        let m = MODULES.get(hm.0)?;
        // SAFETY: caller's descriptor.
        let d = unsafe { read_desc(desc, &[])? };
        check_flags(
            d.flags,
            ZE_KERNEL_FLAG_FORCE_RESIDENCY | ZE_KERNEL_FLAG_EXPLICIT_RESIDENCY,
            "ze_kernel_desc_t.flags",
        )?;
        nn(d.pKernelName)?;
        nn_mut(ph)?;
        // SAFETY: non-null NUL-terminated caller string.
        let name = unsafe { CStr::from_ptr(d.pKernelName) }.to_owned();
        let info = m
            .kernels
            .iter()
            .find(|k| k.name.as_bytes() == name.to_bytes())
            .cloned()
            .ok_or_else(|| {
                fail(
                    ZE_RESULT_ERROR_INVALID_KERNEL_NAME,
                    format_args!("no kernel {name:?} in module"),
                )
            })?;
        let o = ocl::get().map_err(|e| fail(ZE_RESULT_ERROR_DEPENDENCY_UNAVAILABLE, e))?;
        let mut err = 0;
        // SAFETY: built program, NUL-terminated name.
        let k = unsafe { (o.create_kernel)(m.program, name.as_ptr(), &mut err) };
        if err != CL_SUCCESS || k.is_null() {
            return Err(fail(
                ZE_RESULT_ERROR_INVALID_KERNEL_NAME,
                format_args!("clCreateKernel({name:?}) = {err}"),
            ));
        }
        let nargs = info.args.len();
        let kern = Arc::new(Kernel {
            module: m,
            info,
            name,
            cl: Mutex::new(k),
            args: Mutex::new(vec![None; nargs]),
            group: Mutex::new([1, 1, 1]),
        });
        // SAFETY: checked non-null.
        unsafe { out(ph, ze_kernel_handle_t(KERNELS.insert(kern))) }
    })
}

pub(crate) unsafe extern "C" fn kernel_destroy(h: ze_kernel_handle_t) -> ze_result_t {
    entry(|| KERNELS.remove_if(h.0, |_| Ok(())).map(|_| ()))
}

pub(crate) unsafe extern "C" fn kernel_set_group_size(
    h: ze_kernel_handle_t,
    x: u32,
    y: u32,
    z: u32,
) -> ze_result_t {
    entry(|| {
        let k = kernel(h)?;
        let total = x as u64 * y as u64 * z as u64;
        if total == 0 || total > MAX_GROUP_SIZE as u64 {
            return Err(fail(
                ZE_RESULT_ERROR_INVALID_GROUP_SIZE_DIMENSION,
                format_args!("group size {x}x{y}x{z} (each >= 1, product <= {MAX_GROUP_SIZE})"),
            ));
        }
        *lock(&k.group) = [x, y, z];
        Ok(())
    })
}

fn largest_divisor_at_most(n: u32, cap: u32) -> u32 {
    (1..=cap.min(n).max(1))
        .rev()
        .find(|d| n % d == 0)
        .unwrap_or(1)
}

#[allow(clippy::too_many_arguments)]
/// Work-groups of one launch that can be resident at once: the OpenCL CPU runtime runs each work-group to
/// completion on one of its worker threads (`CL_DEVICE_MAX_COMPUTE_UNITS` of them), whatever the group size.
pub(crate) fn max_resident_groups() -> ZeResult<u32> {
    ocl::get()
        .map(|o| o.compute_units)
        .map_err(|e| fail(ZE_RESULT_ERROR_UNINITIALIZED, e))
}

pub(crate) unsafe extern "C" fn kernel_suggest_max_cooperative_group_count(
    h: ze_kernel_handle_t,
    count: *mut u32,
) -> ze_result_t {
    entry(|| {
        kernel(h)?;
        nn_mut(count)?;
        let n = max_resident_groups()?;
        // SAFETY: checked non-null.
        unsafe { *count = n };
        Ok(())
    })
}

pub(crate) unsafe extern "C" fn kernel_suggest_group_size(
    h: ze_kernel_handle_t,
    gx: u32,
    gy: u32,
    gz: u32,
    px: *mut u32,
    py: *mut u32,
    pz: *mut u32,
) -> ze_result_t {
    entry(|| {
        kernel(h)?;
        if gx == 0 || gy == 0 || gz == 0 {
            return Err(ZE_RESULT_ERROR_INVALID_GLOBAL_WIDTH_DIMENSION);
        }
        nn_mut(px)?;
        nn_mut(py)?;
        nn_mut(pz)?;
        let budget = 256;
        let x = largest_divisor_at_most(gx, budget);
        let y = largest_divisor_at_most(gy, budget / x);
        let z = largest_divisor_at_most(gz, budget / (x * y));
        // SAFETY: checked non-null.
        unsafe {
            *px = x;
            *py = y;
            *pz = z;
        }
        Ok(())
    })
}

pub(crate) unsafe extern "C" fn kernel_set_argument_value(
    h: ze_kernel_handle_t,
    idx: u32,
    size: usize,
    pval: *const c_void,
) -> ze_result_t {
    entry(|| {
        let k = kernel(h)?;
        let kind = *k.info.args.get(idx as usize).ok_or_else(|| {
            fail(
                ZE_RESULT_ERROR_INVALID_KERNEL_ARGUMENT_INDEX,
                format_args!(
                    "kernel {}: argument {idx} (has {})",
                    k.info.name,
                    k.info.args.len()
                ),
            )
        })?;
        let bad_size = |want: &dyn std::fmt::Display| {
            fail(
                ZE_RESULT_ERROR_INVALID_KERNEL_ARGUMENT_SIZE,
                format_args!(
                    "kernel {} argument {idx}: size {size}, expected {want}",
                    k.info.name
                ),
            )
        };
        let v = match kind {
            ArgKind::Value(n) => {
                if size != n {
                    return Err(bad_size(&n));
                }
                nn(pval)?;
                // SAFETY: the caller provides `size` readable bytes.
                ArgValue::Bytes(
                    unsafe { std::slice::from_raw_parts(pval as *const u8, size) }.to_vec(),
                )
            }
            ArgKind::GlobalPtr => {
                if size != 8 {
                    return Err(bad_size(&8));
                }
                if pval.is_null() {
                    ArgValue::Ptr(0)
                } else {
                    // SAFETY: the caller provides a pointer-sized value.
                    ArgValue::Ptr(unsafe { std::ptr::read_unaligned(pval as *const usize) })
                }
            }
            ArgKind::LocalPtr => {
                if size == 0 {
                    return Err(bad_size(&"a non-zero local memory size"));
                }
                if !pval.is_null() {
                    return Err(fail(
                        ZE_RESULT_ERROR_INVALID_ARGUMENT,
                        format_args!(
                            "kernel {} argument {idx} is local memory: pArgValue must be null",
                            k.info.name
                        ),
                    ));
                }
                ArgValue::Local(size)
            }
        };
        lock(&k.args)[idx as usize] = Some(v);
        Ok(())
    })
}

pub(crate) unsafe extern "C" fn kernel_get_name(
    h: ze_kernel_handle_t,
    psize: *mut usize,
    buf: *mut c_char,
) -> ze_result_t {
    entry(|| {
        let k = kernel(h)?;
        // SAFETY: caller's pointers.
        unsafe { string_out(&k.name, psize, buf) }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn build_flags_translate() {
        assert_eq!(
            translate_flags("-ze-opt-disable -DX=1").unwrap(),
            "-cl-opt-disable -DX=1"
        );
        assert_eq!(
            translate_flags("-ze-opt-level=2 -ze-take-global-address").unwrap(),
            ""
        );
        assert!(translate_flags("-ze-bogus").is_err());
    }

    #[test]
    fn suggested_sizes_divide() {
        assert_eq!(largest_divisor_at_most(1000, 256), 250);
        assert_eq!(largest_divisor_at_most(7, 256), 7);
        assert_eq!(largest_divisor_at_most(1 << 20, 256), 256);
        assert_eq!(largest_divisor_at_most(5, 1), 1);
    }
}
