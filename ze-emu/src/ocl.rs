//! OpenCL, loaded at run time from `libOpenCL.so.1` (Debian's ocl-icd; select Intel's CPU runtime with
//! `OCL_ICD_FILENAMES`), so ze-emu builds without OpenCL development packages.

#![allow(non_camel_case_types)]

use once_cell::sync::OnceCell;
use std::ffi::{c_char, c_void, CString};

pub type cl_int = i32;
pub type cl_uint = u32;
pub type cl_platform_id = *mut c_void;
pub type cl_device_id = *mut c_void;
pub type cl_context = *mut c_void;
pub type cl_command_queue = *mut c_void;
pub type cl_program = *mut c_void;
pub type cl_kernel = *mut c_void;
pub type cl_event = *mut c_void;

pub const CL_SUCCESS: cl_int = 0;
pub const CL_DEVICE_TYPE_ALL: u64 = 0xFFFF_FFFF;
pub const CL_PLATFORM_NAME: cl_uint = 0x0902;
pub const CL_DEVICE_NAME: cl_uint = 0x102B;
pub const CL_DEVICE_MAX_COMPUTE_UNITS: cl_uint = 0x1002;
pub const CL_DEVICE_IL_VERSION: cl_uint = 0x105B;
pub const CL_PROGRAM_BUILD_LOG: cl_uint = 0x1183;
pub const CL_PROGRAM_BINARY_SIZES: cl_uint = 0x1165;
pub const CL_PROGRAM_BINARIES: cl_uint = 0x1166;
pub const CL_PLATFORM_VERSION: cl_uint = 0x0901;
pub const CL_DRIVER_VERSION: cl_uint = 0x102D;
pub const CL_DEVICE_VERSION: cl_uint = 0x102F;
pub const CL_PROGRAM_NUM_DEVICES: cl_uint = 0x1162;
pub const CL_PROGRAM_DEVICES: cl_uint = 0x1163;
const CL_DEVICE_PARTITION_BY_COUNTS: isize = 0x1087;
const CL_DEVICE_PARTITION_BY_COUNTS_LIST_END: isize = 0;

type GetInfoFn =
    unsafe extern "C" fn(*mut c_void, cl_uint, usize, *mut c_void, *mut usize) -> cl_int;

/// The OpenCL entry points ze-emu uses, plus the chosen platform/device/context.
pub struct Ocl {
    _lib: libloading::Library,
    pub device: cl_device_id,
    /// Where queues of a compute engine other than the first (queue index 1 and up) run: a sub-device of one
    /// compute unit (`clCreateSubDevices`), which has its own task arena in Intel's CPU runtime, so that its
    /// commands start while kernels on the first engine occupy every worker of the device's arena, as commands on
    /// a GPU's other compute engine do; the device itself when the runtime cannot partition it.
    pub engine: cl_device_id,
    pub context: cl_context,
    pub description: String,
    /// The platform's, device's and driver's versions: part of the program cache's key.
    pub runtime_version: String,
    /// `CL_DEVICE_MAX_COMPUTE_UNITS`: the runtime's worker threads. A work-group runs to completion on one worker,
    /// so this many work-groups of a launch are resident at once, and no more (a group spinning on a later one
    /// holds its worker).
    pub compute_units: u32,
    pub create_queue:
        unsafe extern "C" fn(cl_context, cl_device_id, *const u64, *mut cl_int) -> cl_command_queue,
    pub create_program_with_il:
        unsafe extern "C" fn(cl_context, *const c_void, usize, *mut cl_int) -> cl_program,
    pub create_program_with_binary: unsafe extern "C" fn(
        cl_context,
        cl_uint,
        *const cl_device_id,
        *const usize,
        *const *const u8,
        *mut cl_int,
        *mut cl_int,
    ) -> cl_program,
    /// `clGetProgramInfo`.
    pub get_program_info:
        unsafe extern "C" fn(cl_program, cl_uint, usize, *mut c_void, *mut usize) -> cl_int,
    pub build_program: unsafe extern "C" fn(
        cl_program,
        cl_uint,
        *const cl_device_id,
        *const c_char,
        *const c_void,
        *mut c_void,
    ) -> cl_int,
    pub get_program_build_info: unsafe extern "C" fn(
        cl_program,
        cl_device_id,
        cl_uint,
        usize,
        *mut c_void,
        *mut usize,
    ) -> cl_int,
    pub create_kernel: unsafe extern "C" fn(cl_program, *const c_char, *mut cl_int) -> cl_kernel,
    pub set_kernel_arg: unsafe extern "C" fn(cl_kernel, cl_uint, usize, *const c_void) -> cl_int,
    pub enqueue_nd_range: unsafe extern "C" fn(
        cl_command_queue,
        cl_kernel,
        cl_uint,
        *const usize,
        *const usize,
        *const usize,
        cl_uint,
        *const cl_event,
        *mut cl_event,
    ) -> cl_int,
    pub finish: unsafe extern "C" fn(cl_command_queue) -> cl_int,
    pub release_kernel: unsafe extern "C" fn(cl_kernel) -> cl_int,
    pub release_program: unsafe extern "C" fn(cl_program) -> cl_int,
    pub release_queue: unsafe extern "C" fn(cl_command_queue) -> cl_int,
    /// `clSetKernelArgMemPointerINTEL` (cl_intel_unified_shared_memory).
    pub set_kernel_arg_mem_pointer:
        Option<unsafe extern "C" fn(cl_kernel, cl_uint, *const c_void) -> cl_int>,
    /// `clGetDeviceGlobalVariablePointerINTEL` (cl_intel_global_variable_pointers).
    pub get_global_variable_pointer: Option<
        unsafe extern "C" fn(
            cl_device_id,
            cl_program,
            *const c_char,
            *mut usize,
            *mut *mut c_void,
        ) -> cl_int,
    >,
}

// SAFETY: OpenCL objects and entry points are thread-safe per the OpenCL specification (all API calls except
// clSetKernelArg on the same kernel, which ze-emu serialises per kernel).
unsafe impl Send for Ocl {}
// SAFETY: as above.
unsafe impl Sync for Ocl {}

static OCL: OnceCell<Result<Ocl, String>> = OnceCell::new();

/// The process-wide OpenCL state, or why it is unavailable.
pub fn get() -> Result<&'static Ocl, &'static str> {
    OCL.get_or_init(load).as_ref().map_err(|e| e.as_str())
}

fn info_string(f: GetInfoFn, obj: *mut c_void, what: cl_uint) -> String {
    let mut n = 0usize;
    // SAFETY: size query with a null buffer.
    if unsafe { f(obj, what, 0, std::ptr::null_mut(), &mut n) } != CL_SUCCESS || n == 0 {
        return String::new();
    }
    let mut buf = vec![0u8; n];
    // SAFETY: buffer of the reported size.
    if unsafe { f(obj, what, n, buf.as_mut_ptr().cast(), std::ptr::null_mut()) } != CL_SUCCESS {
        return String::new();
    }
    String::from_utf8_lossy(&buf)
        .trim_end_matches('\0')
        .to_string()
}

fn load() -> Result<Ocl, String> {
    let names = ["libOpenCL.so.1", "libOpenCL.so"];
    let mut errors = Vec::new();
    let mut lib = None;
    for n in names {
        // SAFETY: loading the OpenCL ICD loader runs only its own initialisers.
        match unsafe { libloading::Library::new(n) } {
            Ok(l) => {
                lib = Some(l);
                break;
            }
            Err(e) => errors.push(format!("{n}: {e}")),
        }
    }
    let lib = lib.ok_or_else(|| format!("OpenCL ICD loader not found ({})", errors.join("; ")))?;
    macro_rules! sym {
        ($name:literal) => {
            // SAFETY: the symbol is the OpenCL 1.2/2.x/3.0 function of that name; the type at the use site is
            // its C signature, and the library lives inside the returned Ocl.
            unsafe { *lib.get($name).map_err(|e| format!("libOpenCL lacks {}: {e}", String::from_utf8_lossy($name)))? }
        };
    }
    let get_platform_ids: unsafe extern "C" fn(
        cl_uint,
        *mut cl_platform_id,
        *mut cl_uint,
    ) -> cl_int = sym!(b"clGetPlatformIDs\0");
    let get_device_ids: unsafe extern "C" fn(
        cl_platform_id,
        u64,
        cl_uint,
        *mut cl_device_id,
        *mut cl_uint,
    ) -> cl_int = sym!(b"clGetDeviceIDs\0");
    let get_platform_info: GetInfoFn = sym!(b"clGetPlatformInfo\0");
    let get_device_info: GetInfoFn = sym!(b"clGetDeviceInfo\0");
    let create_sub_devices: unsafe extern "C" fn(
        cl_device_id,
        *const isize,
        cl_uint,
        *mut cl_device_id,
        *mut cl_uint,
    ) -> cl_int = sym!(b"clCreateSubDevices\0");
    let create_context: unsafe extern "C" fn(
        *const isize,
        cl_uint,
        *const cl_device_id,
        *const c_void,
        *mut c_void,
        *mut cl_int,
    ) -> cl_context = sym!(b"clCreateContext\0");
    let get_ext: unsafe extern "C" fn(cl_platform_id, *const c_char) -> *mut c_void =
        sym!(b"clGetExtensionFunctionAddressForPlatform\0");

    let mut np: cl_uint = 0;
    // SAFETY: count query.
    let r = unsafe { get_platform_ids(0, std::ptr::null_mut(), &mut np) };
    if r != CL_SUCCESS || np == 0 {
        return Err(format!("no OpenCL platform (clGetPlatformIDs = {r}); set OCL_ICD_FILENAMES to Intel's libintelocl.so (scripts/device-env.sh)"));
    }
    let mut plats = vec![std::ptr::null_mut(); np as usize];
    // SAFETY: buffer of np entries.
    unsafe { get_platform_ids(np, plats.as_mut_ptr(), std::ptr::null_mut()) };
    let mut seen = Vec::new();
    for p in plats {
        let pname = info_string(get_platform_info, p, CL_PLATFORM_NAME);
        let mut nd: cl_uint = 0;
        // SAFETY: count query.
        if unsafe { get_device_ids(p, CL_DEVICE_TYPE_ALL, 0, std::ptr::null_mut(), &mut nd) }
            != CL_SUCCESS
            || nd == 0
        {
            seen.push(format!("{pname}: no devices"));
            continue;
        }
        let mut devs = vec![std::ptr::null_mut(); nd as usize];
        // SAFETY: buffer of nd entries.
        unsafe {
            get_device_ids(
                p,
                CL_DEVICE_TYPE_ALL,
                nd,
                devs.as_mut_ptr(),
                std::ptr::null_mut(),
            )
        };
        for d in devs {
            let il = info_string(get_device_info, d, CL_DEVICE_IL_VERSION);
            let dname = info_string(get_device_info, d, CL_DEVICE_NAME);
            if !il.contains("SPIR-V") {
                seen.push(format!("{pname} / {dname}: no SPIR-V IL"));
                continue;
            }
            let mut cu: cl_uint = 0;
            // SAFETY: valid device; the value is one cl_uint.
            let r = unsafe {
                get_device_info(
                    d,
                    CL_DEVICE_MAX_COMPUTE_UNITS,
                    std::mem::size_of::<cl_uint>(),
                    (&mut cu as *mut cl_uint).cast(),
                    std::ptr::null_mut(),
                )
            };
            // One compute unit of the device as a second engine (see `Ocl::engine`), when it has two or more.
            let mut engine = d;
            if cu >= 2 {
                let props = [
                    CL_DEVICE_PARTITION_BY_COUNTS,
                    1,
                    CL_DEVICE_PARTITION_BY_COUNTS_LIST_END,
                    0,
                ];
                let (mut sub, mut n): (cl_device_id, cl_uint) = (std::ptr::null_mut(), 0);
                // SAFETY: valid device; a zero-terminated property list; room for one sub-device.
                let r = unsafe { create_sub_devices(d, props.as_ptr(), 1, &mut sub, &mut n) };
                if r == CL_SUCCESS && n == 1 && !sub.is_null() {
                    engine = sub;
                }
            }
            let devices: Vec<cl_device_id> = if engine == d {
                vec![d]
            } else {
                vec![d, engine]
            };
            let mut err = 0;
            // SAFETY: valid device ids (the device and its sub-device), no callback.
            let ctx = unsafe {
                create_context(
                    std::ptr::null(),
                    devices.len() as cl_uint,
                    devices.as_ptr(),
                    std::ptr::null(),
                    std::ptr::null_mut(),
                    &mut err,
                )
            };
            if err != CL_SUCCESS || ctx.is_null() {
                seen.push(format!("{pname} / {dname}: clCreateContext = {err}"));
                continue;
            }
            let ext = |name: &str| -> *mut c_void {
                let c = CString::new(name).expect("no NUL");
                // SAFETY: valid platform and NUL-terminated name.
                unsafe { get_ext(p, c.as_ptr()) }
            };
            let set_ptr = ext("clSetKernelArgMemPointerINTEL");
            let global_ptr = ext("clGetDeviceGlobalVariablePointerINTEL");
            return Ok(Ocl {
                compute_units: if r == CL_SUCCESS { cu.max(1) } else { 1 },
                device: d,
                engine,
                context: ctx,
                description: format!("{pname} / {dname} ({il})"),
                runtime_version: format!(
                    "{} / {} / {}",
                    info_string(get_platform_info, p, CL_PLATFORM_VERSION),
                    info_string(get_device_info, d, CL_DEVICE_VERSION),
                    info_string(get_device_info, d, CL_DRIVER_VERSION)
                ),
                create_queue: sym!(b"clCreateCommandQueueWithProperties\0"),
                create_program_with_il: sym!(b"clCreateProgramWithIL\0"),
                create_program_with_binary: sym!(b"clCreateProgramWithBinary\0"),
                get_program_info: sym!(b"clGetProgramInfo\0"),
                build_program: sym!(b"clBuildProgram\0"),
                get_program_build_info: sym!(b"clGetProgramBuildInfo\0"),
                create_kernel: sym!(b"clCreateKernel\0"),
                set_kernel_arg: sym!(b"clSetKernelArg\0"),
                enqueue_nd_range: sym!(b"clEnqueueNDRangeKernel\0"),
                finish: sym!(b"clFinish\0"),
                release_kernel: sym!(b"clReleaseKernel\0"),
                release_program: sym!(b"clReleaseProgram\0"),
                release_queue: sym!(b"clReleaseCommandQueue\0"),
                // SAFETY: non-null addresses returned for these names are the extension functions with these
                // C signatures (cl_ext.h).
                set_kernel_arg_mem_pointer: (!set_ptr.is_null())
                    .then(|| unsafe { std::mem::transmute(set_ptr) }),
                // SAFETY: as above.
                get_global_variable_pointer: (!global_ptr.is_null())
                    .then(|| unsafe { std::mem::transmute(global_ptr) }),
                _lib: lib,
            });
        }
    }
    Err(format!(
        "no OpenCL device with SPIR-V support ({})",
        seen.join("; ")
    ))
}
