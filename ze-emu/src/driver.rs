//! Driver, devices and contexts.

use crate::objects::*;
use crate::util::*;
use level_zero_sys::*;
use std::collections::BTreeMap;
use std::ffi::{c_char, c_void};
use std::sync::{Arc, Mutex};

fn device_count() -> ZeResult<usize> {
    match std::env::var(DEVICES_ENV) {
        Err(_) => Ok(1),
        Ok(s) => match s.trim().parse::<usize>() {
            Ok(n) if (1..=MAX_DEVICES).contains(&n) => Ok(n),
            _ => Err(fail(
                ZE_RESULT_ERROR_INVALID_ARGUMENT,
                format_args!("{DEVICES_ENV}={s:?} is not a device count in 1..={MAX_DEVICES}"),
            )),
        },
    }
}

/// Writes a counted array per the Level Zero "pCount" protocol.
///
/// # Safety
/// `p_count` must be valid for read/write; `out` null or valid for `*p_count` elements.
pub unsafe fn counted<T: Copy>(p_count: *mut u32, out: *mut T, items: &[T]) -> ZeResult {
    let p_count = nn_mut(p_count)?;
    // SAFETY: caller guarantee; non-null.
    let want = unsafe { *p_count } as usize;
    if want == 0 || out.is_null() {
        // SAFETY: as above.
        unsafe { *p_count = items.len() as u32 };
        return Ok(());
    }
    let n = want.min(items.len());
    for (i, item) in items.iter().take(n).enumerate() {
        // SAFETY: caller guarantee: `out` has room for `want >= n` elements.
        unsafe { out.add(i).write(*item) };
    }
    // SAFETY: as above.
    unsafe { *p_count = n as u32 };
    Ok(())
}

// ---------------------------------------------------------------------------------------------- global

pub(crate) unsafe extern "C" fn ze_init(flags: ze_init_flags_t) -> ze_result_t {
    entry(|| {
        check_flags(
            flags,
            ZE_INIT_FLAG_GPU_ONLY | ZE_INIT_FLAG_VPU_ONLY,
            "zeInit flags",
        )?;
        if flags == ZE_INIT_FLAG_VPU_ONLY {
            return Err(ZE_RESULT_ERROR_UNINITIALIZED); // only GPU devices here
        }
        let n = device_count()?;
        DRIVER.devices.get_or_init(|| {
            (0..n)
                .map(|i| {
                    let d = Arc::new(Device { index: i as u32 });
                    DEVICES.insert(d.clone());
                    d
                })
                .collect()
        });
        Ok(())
    })
}

// ---------------------------------------------------------------------------------------------- driver

pub(crate) unsafe extern "C" fn driver_get(
    p_count: *mut u32,
    ph: *mut ze_driver_handle_t,
) -> ze_result_t {
    entry(|| {
        if DRIVER.devices.get().is_none() {
            return Err(ZE_RESULT_ERROR_UNINITIALIZED);
        }
        // SAFETY: loader passes the caller's pointers; checked inside.
        unsafe { counted(p_count, ph, &[driver_handle()]) }
    })
}

pub(crate) unsafe extern "C" fn driver_get_api_version(
    h: ze_driver_handle_t,
    v: *mut ze_api_version_t,
) -> ze_result_t {
    entry(|| {
        check_driver(h)?;
        // SAFETY: caller's output pointer, null-checked inside.
        unsafe { out(v, ZE_API_VERSION_1_4) }
    })
}

/// Driver UUID (stable, "ze-emu" + version).
pub const DRIVER_UUID: [u8; 16] = *b"ze-emu.xpushmem1";

pub(crate) unsafe extern "C" fn driver_get_properties(
    h: ze_driver_handle_t,
    p: *mut ze_driver_properties_t,
) -> ze_result_t {
    entry(|| {
        check_driver(h)?;
        // SAFETY: caller's output structure, checked inside.
        let p = unsafe { check_props(p, &[])? };
        // SAFETY: checked non-null and stype above.
        unsafe {
            (*p).uuid = ze_driver_uuid_t { id: DRIVER_UUID };
            (*p).driverVersion = ze_make_version(0, 1);
        }
        Ok(())
    })
}

pub(crate) unsafe extern "C" fn driver_get_ipc_properties(
    h: ze_driver_handle_t,
    p: *mut ze_driver_ipc_properties_t,
) -> ze_result_t {
    entry(|| {
        check_driver(h)?;
        // SAFETY: caller's output structure, checked inside.
        let p = unsafe { check_props(p, &[])? };
        // SAFETY: checked.
        unsafe { (*p).flags = ZE_IPC_PROPERTY_FLAG_MEMORY };
        Ok(())
    })
}

pub(crate) unsafe extern "C" fn driver_get_extension_function_address(
    h: ze_driver_handle_t,
    name: *const c_char,
    pp: *mut *mut c_void,
) -> ze_result_t {
    entry(|| {
        check_driver(h)?;
        nn(name)?;
        nn_mut(pp)?;
        Err(ZE_RESULT_ERROR_INVALID_ARGUMENT) // no extension functions
    })
}

// ---------------------------------------------------------------------------------------------- device

pub(crate) unsafe extern "C" fn device_get(
    h: ze_driver_handle_t,
    p_count: *mut u32,
    ph: *mut ze_device_handle_t,
) -> ze_result_t {
    entry(|| {
        let devs = check_driver(h)?;
        let handles: Vec<ze_device_handle_t> = devs.iter().map(device_handle).collect();
        // SAFETY: caller's pointers, checked inside.
        unsafe { counted(p_count, ph, &handles) }
    })
}

pub(crate) unsafe extern "C" fn device_get_sub_devices(
    h: ze_device_handle_t,
    p_count: *mut u32,
    ph: *mut ze_device_handle_t,
) -> ze_result_t {
    entry(|| {
        device(h)?;
        // SAFETY: caller's pointers, checked inside.
        unsafe { counted(p_count, ph, &[]) }
    })
}

/// Device name as reported.
pub fn device_name(d: &Device) -> String {
    format!(
        "ze-emu device {} (memfd memory, OpenCL CPU kernels)",
        d.index
    )
}

pub(crate) unsafe extern "C" fn device_get_properties(
    h: ze_device_handle_t,
    p: *mut ze_device_properties_t,
) -> ze_result_t {
    entry(|| {
        let d = device(h)?;
        // SAFETY: caller's output structure, checked inside.
        let p = unsafe { check_props(p, &[])? };
        // SAFETY: checked non-null / stype; we keep stype and pNext.
        let props = unsafe { &mut *p };
        props.type_ = ZE_DEVICE_TYPE_GPU;
        props.vendorId = 0x8086;
        props.deviceId = 0x0e11; // not a real product id
        props.flags = 0;
        props.subdeviceId = 0;
        props.coreClockRate = 1000;
        props.maxMemAllocSize = MAX_ALLOC;
        props.maxHardwareContexts = 64;
        props.maxCommandQueuePriority = 2;
        props.numThreadsPerEU = 8;
        props.physicalEUSimdWidth = 8;
        props.numEUsPerSubslice = 8;
        props.numSubslicesPerSlice = 1;
        props.numSlices = 1;
        props.timerResolution = 1;
        props.timestampValidBits = 64;
        props.kernelTimestampValidBits = 64;
        let mut uuid = [0u8; 16];
        uuid[..6].copy_from_slice(b"ze-emu");
        uuid[12..].copy_from_slice(&d.index.to_le_bytes());
        props.uuid = ze_device_uuid_t { id: uuid };
        copy_name(&mut props.name.0, &device_name(&d));
        Ok(())
    })
}

pub(crate) unsafe extern "C" fn device_get_compute_properties(
    h: ze_device_handle_t,
    p: *mut ze_device_compute_properties_t,
) -> ze_result_t {
    entry(|| {
        device(h)?;
        // SAFETY: caller's output structure, checked inside.
        let p = unsafe { check_props(p, &[])? };
        // SAFETY: checked.
        let c = unsafe { &mut *p };
        c.maxTotalGroupSize = MAX_GROUP_SIZE;
        c.maxGroupSizeX = MAX_GROUP_SIZE;
        c.maxGroupSizeY = MAX_GROUP_SIZE;
        c.maxGroupSizeZ = MAX_GROUP_SIZE;
        c.maxGroupCountX = u32::MAX;
        c.maxGroupCountY = u32::MAX;
        c.maxGroupCountZ = u32::MAX;
        c.maxSharedLocalMemory = 64 * 1024;
        c.numSubGroupSizes = 3;
        c.subGroupSizes = [4, 8, 16, 0, 0, 0, 0, 0];
        Ok(())
    })
}

pub(crate) unsafe extern "C" fn device_get_module_properties(
    h: ze_device_handle_t,
    p: *mut ze_device_module_properties_t,
) -> ze_result_t {
    entry(|| {
        device(h)?;
        // SAFETY: caller's output structure, checked inside.
        let p = unsafe { check_props(p, &[])? };
        // SAFETY: checked.
        let m = unsafe { &mut *p };
        m.spirvVersionSupported = ze_make_version(1, 4);
        m.flags = ZE_DEVICE_MODULE_FLAG_INT64_ATOMICS | ZE_DEVICE_MODULE_FLAG_FP64;
        let fp = ZE_DEVICE_FP_FLAG_DENORM
            | ZE_DEVICE_FP_FLAG_INF_NAN
            | ZE_DEVICE_FP_FLAG_ROUND_TO_NEAREST
            | ZE_DEVICE_FP_FLAG_ROUND_TO_ZERO
            | ZE_DEVICE_FP_FLAG_ROUND_TO_INF
            | ZE_DEVICE_FP_FLAG_FMA;
        m.fp16flags = 0;
        m.fp32flags = fp;
        m.fp64flags = fp;
        m.maxArgumentsSize = 4096;
        m.printfBufferSize = 4 << 20;
        m.nativeKernelSupported = ze_native_kernel_uuid_t::default();
        Ok(())
    })
}

pub(crate) unsafe extern "C" fn device_get_command_queue_group_properties(
    h: ze_device_handle_t,
    p_count: *mut u32,
    p: *mut ze_command_queue_group_properties_t,
) -> ze_result_t {
    entry(|| {
        device(h)?;
        let p_count = nn_mut(p_count)?;
        // SAFETY: caller's count pointer, non-null.
        let want = unsafe { *p_count } as usize;
        if want == 0 || p.is_null() {
            // SAFETY: as above.
            unsafe { *p_count = QUEUE_GROUPS.len() as u32 };
            return Ok(());
        }
        let n = want.min(QUEUE_GROUPS.len());
        for (i, (flags, fill, queues)) in QUEUE_GROUPS.iter().take(n).enumerate() {
            // SAFETY: the caller provides `want >= n` structures.
            let e = unsafe { check_props(p.add(i), &[])? };
            // SAFETY: checked.
            unsafe {
                (*e).flags = *flags;
                (*e).maxMemoryFillPatternSize = *fill;
                (*e).numQueues = *queues;
            }
        }
        // SAFETY: as above.
        unsafe { *p_count = n as u32 };
        Ok(())
    })
}

pub(crate) unsafe extern "C" fn device_get_memory_properties(
    h: ze_device_handle_t,
    p_count: *mut u32,
    p: *mut ze_device_memory_properties_t,
) -> ze_result_t {
    entry(|| {
        device(h)?;
        let p_count = nn_mut(p_count)?;
        // SAFETY: caller's count pointer, non-null.
        let want = unsafe { *p_count };
        if want == 0 || p.is_null() {
            // SAFETY: as above.
            unsafe { *p_count = 1 };
            return Ok(());
        }
        // SAFETY: the caller provides at least one structure.
        let e = unsafe { check_props(p, &[])? };
        // SAFETY: checked.
        let m = unsafe { &mut *e };
        m.flags = 0;
        m.maxClockRate = 1000;
        m.maxBusWidth = 64;
        m.totalSize = MEMORY_SIZE;
        copy_name(&mut m.name.0, "ze-emu memfd");
        // SAFETY: as above.
        unsafe { *p_count = 1 };
        Ok(())
    })
}

/// One rule of [`P2P_ENV`]: the pair it applies to (`None`: every pair) and its (access, atomics).
type P2pRule = (Option<(u32, u32)>, (bool, bool));

/// The rules of a [`P2P_ENV`] value, or the error naming the variable, its value and the item that is wrong.
fn parse_p2p(v: &str) -> Result<Vec<P2pRule>, String> {
    v.split(',')
        .map(str::trim)
        .filter(|i| !i.is_empty())
        .map(|item| {
            let (pair, mode) = match item.split_once(':') {
                Some((p, m)) => (Some(p), m),
                None => (None, item),
            };
            let caps = match mode.trim() {
                "full" => (true, true),
                "access" => (true, false),
                "none" => (false, false),
                m => {
                    return Err(format!(
                        "{P2P_ENV}={v:?}: mode {m:?} is not full, access or none"
                    ))
                }
            };
            let pair = match pair {
                None => None,
                Some(p) => {
                    let parsed = p
                        .split_once('-')
                        .and_then(|(x, y)| Some((x.trim().parse().ok()?, y.trim().parse().ok()?)));
                    Some(parsed.ok_or_else(|| {
                        format!("{P2P_ENV}={v:?}: {p:?} is not a pair of device indices A-B")
                    })?)
                }
            };
            Ok((pair, caps))
        })
        .collect()
}

/// What device `a` may do on device `b`'s memory under `rules`: (access, atomics); the last rule naming the pair
/// (or every pair) wins; a device on itself: everything.
fn p2p_of(rules: &[P2pRule], a: u32, b: u32) -> (bool, bool) {
    if a == b {
        return (true, true);
    }
    let mut caps = (true, true);
    for (pair, c) in rules {
        match pair {
            None => caps = *c,
            Some((x, y)) if (*x, *y) == (a, b) || (*x, *y) == (b, a) => caps = *c,
            Some(_) => {}
        }
    }
    caps
}

/// What device `a` may do on device `b`'s memory: (access, atomics), from [`P2P_ENV`] (parsed once).
fn p2p(a: u32, b: u32) -> ZeResult<(bool, bool)> {
    static RULES: once_cell::sync::OnceCell<Result<Vec<P2pRule>, String>> =
        once_cell::sync::OnceCell::new();
    let rules = RULES.get_or_init(|| match std::env::var(P2P_ENV) {
        Ok(v) => parse_p2p(&v),
        Err(_) => Ok(Vec::new()),
    });
    let rules = rules
        .as_ref()
        .map_err(|e| fail(ZE_RESULT_ERROR_INVALID_ARGUMENT, e))?;
    Ok(p2p_of(rules, a, b))
}

pub(crate) unsafe extern "C" fn device_get_p2p_properties(
    h: ze_device_handle_t,
    peer: ze_device_handle_t,
    p: *mut ze_device_p2p_properties_t,
) -> ze_result_t {
    entry(|| {
        let (access, atomics) = p2p(device(h)?.index, device(peer)?.index)?;
        // SAFETY: caller's output structure, checked inside.
        let p = unsafe { check_props(p, &[])? };
        let mut flags = 0;
        if access {
            flags |= ZE_DEVICE_P2P_PROPERTY_FLAG_ACCESS;
        }
        if atomics {
            flags |= ZE_DEVICE_P2P_PROPERTY_FLAG_ATOMICS;
        }
        // SAFETY: checked.
        unsafe { (*p).flags = flags };
        Ok(())
    })
}

pub(crate) unsafe extern "C" fn device_can_access_peer(
    h: ze_device_handle_t,
    peer: ze_device_handle_t,
    v: *mut ze_bool_t,
) -> ze_result_t {
    entry(|| {
        let (access, _) = p2p(device(h)?.index, device(peer)?.index)?;
        // SAFETY: caller's output pointer, checked inside.
        unsafe { out(v, ze_bool_t::from(access)) }
    })
}

pub(crate) unsafe extern "C" fn device_get_status(h: ze_device_handle_t) -> ze_result_t {
    entry(|| device(h).map(|_| ()))
}

// ---------------------------------------------------------------------------------------------- context

pub(crate) unsafe extern "C" fn context_create(
    h: ze_driver_handle_t,
    desc: *const ze_context_desc_t,
    ph: *mut ze_context_handle_t,
) -> ze_result_t {
    entry(|| {
        check_driver(h)?;
        // SAFETY: caller's descriptor, checked inside.
        let d = unsafe { read_desc(desc, &[])? };
        check_flags(d.flags, ZE_CONTEXT_FLAG_TBD, "ze_context_desc_t.flags")?;
        nn_mut(ph)?;
        let c = Arc::new(Context {
            allocs: Mutex::new(BTreeMap::new()),
            vm: Mutex::default(),
        });
        let handle = CONTEXTS.insert(c);
        // SAFETY: checked non-null.
        unsafe { out(ph, ze_context_handle_t(handle)) }
    })
}

pub(crate) unsafe extern "C" fn context_destroy(h: ze_context_handle_t) -> ze_result_t {
    entry(|| {
        let c = CONTEXTS.remove_if(h.0, |_| Ok(()))?;
        // Allocations still alive are released with the context (their mappings go away).
        std::mem::take(&mut *lock(&c.allocs));
        std::mem::take(&mut *lock(&c.vm));
        Ok(())
    })
}

pub(crate) unsafe extern "C" fn context_get_status(h: ze_context_handle_t) -> ze_result_t {
    entry(|| context(h).map(|_| ()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn p2p_topologies_parse_and_apply() {
        let r = parse_p2p("0-2:none, 1-2:access").expect("valid");
        assert_eq!(p2p_of(&r, 0, 2), (false, false));
        assert_eq!(p2p_of(&r, 2, 0), (false, false));
        assert_eq!(p2p_of(&r, 1, 2), (true, false));
        assert_eq!(p2p_of(&r, 0, 1), (true, true));
        assert_eq!(p2p_of(&r, 2, 2), (true, true));
        // A rule for every pair, then one pair overridden.
        let r = parse_p2p("none,0-1:full").expect("valid");
        assert_eq!(p2p_of(&r, 1, 0), (true, true));
        assert_eq!(p2p_of(&r, 1, 2), (false, false));
        assert_eq!(p2p_of(&parse_p2p("").expect("empty"), 3, 4), (true, true));
        // Bad values name the variable, the value and the item.
        let e = parse_p2p("0-1:fast").unwrap_err();
        assert!(e.contains(P2P_ENV) && e.contains("\"fast\""), "{e}");
        let e = parse_p2p("0+1:none").unwrap_err();
        assert!(e.contains("\"0+1\"") && e.contains("A-B"), "{e}");
    }
}
