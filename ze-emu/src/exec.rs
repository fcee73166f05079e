//! Command queues, command lists (regular and immediate), events, event pools and fences.
//!
//! Every command queue and every immediate command list owns one worker thread that executes submitted work in
//! order, so waits on events signalled later (by the host or another queue) behave like on a GPU: they block
//! the queue, not the caller. Synchronous immediate lists and synchronous queues wait for their work before
//! returning.

use crate::module::{Launch, Worker};
use crate::objects::{context, device, Context, Device, QUEUE_GROUPS};
use crate::registry::Registry;
use crate::util::*;
use level_zero_sys::*;
use once_cell::sync::Lazy;
use std::ffi::c_void;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex};

/// Live command queues.
pub static QUEUES: Lazy<Registry<CommandQueue>> = Lazy::new(Registry::default);
/// Live command lists.
pub static LISTS: Lazy<Registry<CommandList>> = Lazy::new(Registry::default);
/// Live event pools.
pub static POOLS: Lazy<Registry<EventPool>> = Lazy::new(Registry::default);
/// Live events.
pub static EVENTS: Lazy<Registry<Event>> = Lazy::new(Registry::default);
/// Live fences.
pub static FENCES: Lazy<Registry<Fence>> = Lazy::new(Registry::default);

// ---------------------------------------------------------------------------------------------- commands

/// One recorded command.
#[derive(Clone)]
pub enum Command {
    /// memcpy.
    Copy { dst: usize, src: usize, n: usize },
    /// Pattern fill.
    Fill {
        dst: usize,
        pattern: Vec<u8>,
        size: usize,
    },
    /// Signal an event.
    Signal(Arc<Event>),
    /// Wait until all events are signalled.
    Wait(Vec<Arc<Event>>),
    /// Reset an event.
    Reset(Arc<Event>),
    /// Kernel launch (arguments captured at append time).
    Launch(Arc<Launch>),
}

fn run_commands(cmds: &[Command], w: &mut Worker) -> Result<(), String> {
    let mut first_err = None;
    for c in cmds {
        match c {
            Command::Copy { dst, src, n } => {
                // SAFETY: the application guarantees both ranges are valid for the copy when it executes (as on
                // a GPU); overlap was rejected at append time.
                unsafe { std::ptr::copy_nonoverlapping(*src as *const u8, *dst as *mut u8, *n) };
            }
            Command::Fill { dst, pattern, size } => {
                // SAFETY: as above for [dst, dst+size).
                let out = unsafe { std::slice::from_raw_parts_mut(*dst as *mut u8, *size) };
                for (i, b) in out.iter_mut().enumerate() {
                    *b = pattern[i % pattern.len()];
                }
            }
            Command::Signal(e) => {
                std::sync::atomic::fence(Ordering::SeqCst);
                e.flag.set();
            }
            Command::Wait(evs) => {
                for e in evs {
                    e.flag.wait(u64::MAX);
                }
                std::sync::atomic::fence(Ordering::SeqCst);
            }
            Command::Reset(e) => e.flag.reset(),
            Command::Launch(l) => {
                if let Err(e) = crate::module::run_launch(l, w) {
                    eprintln!("ze-emu: kernel launch failed: {e}");
                    first_err.get_or_insert(e);
                }
            }
        }
    }
    match first_err {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

// ---------------------------------------------------------------------------------------------- executor

type Job = Box<dyn FnOnce(&mut Worker) -> Result<(), String> + Send>;

struct ExecShared {
    done: Mutex<u64>,
    cv: Condvar,
    error: Mutex<Option<String>>,
}

/// An in-order worker thread.
pub struct Executor {
    tx: Mutex<mpsc::Sender<Job>>,
    submitted: Mutex<u64>,
    shared: Arc<ExecShared>,
}

impl Executor {
    /// A worker thread; `engine`: it serves a queue of a compute engine other than the first (see `Worker`).
    fn new(name: &str, engine: bool) -> ZeResult<Self> {
        let (tx, rx) = mpsc::channel::<Job>();
        let shared = Arc::new(ExecShared {
            done: Mutex::new(0),
            cv: Condvar::new(),
            error: Mutex::new(None),
        });
        let s2 = shared.clone();
        std::thread::Builder::new()
            .name(name.into())
            .spawn(move || {
                let mut w = Worker::on_engine(engine);
                while let Ok(job) = rx.recv() {
                    let r = job(&mut w);
                    if let Err(e) = r {
                        lock(&s2.error).get_or_insert(e);
                    }
                    *lock(&s2.done) += 1;
                    s2.cv.notify_all();
                }
            })
            .map_err(|e| {
                fail(
                    ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY,
                    format_args!("spawn worker: {e}"),
                )
            })?;
        Ok(Self {
            tx: Mutex::new(tx),
            submitted: Mutex::new(0),
            shared,
        })
    }

    fn submit(&self, job: Job) -> ZeResult<u64> {
        let mut sub = lock(&self.submitted);
        lock(&self.tx)
            .send(job)
            .map_err(|_| ZE_RESULT_ERROR_DEVICE_LOST)?;
        *sub += 1;
        Ok(*sub)
    }

    /// Waits until job `seq` (or everything submitted, for `None`) completed; Level Zero timeout rules.
    fn wait(&self, seq: Option<u64>, timeout_ns: u64) -> ZeResult {
        let target = seq.unwrap_or_else(|| *lock(&self.submitted));
        let mut done = lock(&self.shared.done);
        let deadline = (timeout_ns != u64::MAX)
            .then(|| std::time::Instant::now() + std::time::Duration::from_nanos(timeout_ns));
        while *done < target {
            match deadline {
                None => done = self.shared.cv.wait(done).unwrap_or_else(|e| e.into_inner()),
                Some(d) => {
                    let now = std::time::Instant::now();
                    if now >= d {
                        return Err(ZE_RESULT_NOT_READY);
                    }
                    done = self
                        .shared
                        .cv
                        .wait_timeout(done, d - now)
                        .unwrap_or_else(|e| e.into_inner())
                        .0;
                }
            }
        }
        drop(done);
        if let Some(e) = lock(&self.shared.error).as_ref() {
            return Err(fail(
                ZE_RESULT_ERROR_DEVICE_LOST,
                format_args!("earlier work failed: {e}"),
            ));
        }
        Ok(())
    }

    /// Whether all submitted work has finished, allowing a short grace period: work whose last event was
    /// already signalled may still be retiring (as on a GPU), and destroying right after the host saw that
    /// event is legal.
    fn idle(&self) -> bool {
        let target = *lock(&self.submitted);
        !matches!(
            self.wait_done(target, 200_000_000),
            Err(ZE_RESULT_NOT_READY)
        )
    }

    fn wait_done(&self, target: u64, timeout_ns: u64) -> ZeResult {
        let mut done = lock(&self.shared.done);
        let deadline = std::time::Instant::now() + std::time::Duration::from_nanos(timeout_ns);
        while *done < target {
            let now = std::time::Instant::now();
            if now >= deadline {
                return Err(ZE_RESULT_NOT_READY);
            }
            done = self
                .shared
                .cv
                .wait_timeout(done, deadline - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------------- queue

/// A command queue.
pub struct CommandQueue {
    /// Context.
    pub ctx: Arc<Context>,
    /// Device.
    pub device: Arc<Device>,
    /// Group ordinal.
    pub ordinal: u32,
    sync: bool,
    exec: Executor,
}

/// Validates a queue descriptor; returns (ordinal, synchronous, whether it is on a compute engine other than the
/// first: a compute group's queue index 1 and up).
///
/// # Safety
/// `desc` null or readable.
unsafe fn queue_desc(desc: *const ze_command_queue_desc_t) -> ZeResult<(u32, bool, bool)> {
    // SAFETY: caller guarantee.
    let d = unsafe { read_desc(desc, &[])? };
    let group = QUEUE_GROUPS.get(d.ordinal as usize).ok_or_else(|| {
        fail(
            ZE_RESULT_ERROR_INVALID_ARGUMENT,
            format_args!(
                "command queue group ordinal {} (have {})",
                d.ordinal,
                QUEUE_GROUPS.len()
            ),
        )
    })?;
    if d.index >= group.2 {
        return Err(fail(
            ZE_RESULT_ERROR_INVALID_ARGUMENT,
            format_args!(
                "queue index {} (group {} has {})",
                d.index, d.ordinal, group.2
            ),
        ));
    }
    check_flags(
        d.flags,
        ZE_COMMAND_QUEUE_FLAG_EXPLICIT_ONLY | ZE_COMMAND_QUEUE_FLAG_IN_ORDER,
        "ze_command_queue_desc_t.flags",
    )?;
    if d.mode.0 > ZE_COMMAND_QUEUE_MODE_ASYNCHRONOUS.0 {
        return Err(fail(
            ZE_RESULT_ERROR_INVALID_ENUMERATION,
            format_args!("queue mode {}", d.mode.0),
        ));
    }
    if d.priority.0 > ZE_COMMAND_QUEUE_PRIORITY_PRIORITY_HIGH.0 {
        return Err(fail(
            ZE_RESULT_ERROR_INVALID_ENUMERATION,
            format_args!("queue priority {}", d.priority.0),
        ));
    }
    let engine = d.index > 0 && group.0 & ZE_COMMAND_QUEUE_GROUP_PROPERTY_FLAG_COMPUTE != 0;
    Ok((
        d.ordinal,
        d.mode == ZE_COMMAND_QUEUE_MODE_SYNCHRONOUS,
        engine,
    ))
}

pub(crate) unsafe extern "C" fn queue_create(
    hctx: ze_context_handle_t,
    hdev: ze_device_handle_t,
    desc: *const ze_command_queue_desc_t,
    ph: *mut ze_command_queue_handle_t,
) -> ze_result_t {
    entry(|| {
        let ctx = context(hctx)?;
        let dev = device(hdev)?;
        // SAFETY: caller's descriptor.
        let (ordinal, sync, engine) = unsafe { queue_desc(desc)? };
        nn_mut(ph)?;
        let q = Arc::new(CommandQueue {
            ctx,
            device: dev,
            ordinal,
            sync,
            exec: Executor::new("ze-emu-queue", engine)?,
        });
        let h = QUEUES.insert(q);
        // SAFETY: checked non-null.
        unsafe { out(ph, ze_command_queue_handle_t(h)) }
    })
}

pub(crate) unsafe extern "C" fn queue_destroy(h: ze_command_queue_handle_t) -> ze_result_t {
    entry(|| {
        QUEUES
            .remove_if(h.0, |q| {
                if q.exec.idle() {
                    Ok(())
                } else {
                    Err(fail(
                        ZE_RESULT_ERROR_HANDLE_OBJECT_IN_USE,
                        "zeCommandQueueDestroy: the queue still has work in flight",
                    ))
                }
            })
            .map(|_| ())
    })
}

pub(crate) unsafe extern "C" fn queue_execute(
    h: ze_command_queue_handle_t,
    n: u32,
    ph: *mut ze_command_list_handle_t,
    hfence: ze_fence_handle_t,
) -> ze_result_t {
    entry(|| {
        let q = QUEUES.get(h.0)?;
        if n == 0 {
            return Err(ZE_RESULT_ERROR_INVALID_SIZE);
        }
        nn_mut(ph)?;
        let fence = FENCES.get_opt(hfence.0)?;
        if let Some(f) = &fence {
            if f.queue != h.0 as usize {
                return Err(fail(
                    ZE_RESULT_ERROR_INVALID_SYNCHRONIZATION_OBJECT,
                    "fence was created on another queue",
                ));
            }
        }
        let mut batches = Vec::with_capacity(n as usize);
        let mut lists = Vec::with_capacity(n as usize);
        for i in 0..n as usize {
            // SAFETY: the caller provides `n` handles.
            let lh = unsafe { *ph.add(i) };
            let l = LISTS.get(lh.0)?;
            if l.immediate.is_some() {
                return Err(fail(
                    ZE_RESULT_ERROR_INVALID_COMMAND_LIST_TYPE,
                    "immediate command lists cannot be executed on a queue",
                ));
            }
            if l.ordinal != q.ordinal {
                return Err(fail(
                    ZE_RESULT_ERROR_INVALID_COMMAND_LIST_TYPE,
                    format_args!(
                        "list of group {} executed on a queue of group {}",
                        l.ordinal, q.ordinal
                    ),
                ));
            }
            if !Arc::ptr_eq(&l.ctx, &q.ctx) {
                return Err(fail(
                    ZE_RESULT_ERROR_INVALID_ARGUMENT,
                    "command list and queue belong to different contexts",
                ));
            }
            if !Arc::ptr_eq(&l.device, &q.device) {
                return Err(fail(
                    ZE_RESULT_ERROR_INVALID_ARGUMENT,
                    "command list and queue belong to different devices",
                ));
            }
            let st = lock(&l.state);
            let cmds = st.frozen.clone().ok_or_else(|| {
                fail(
                    ZE_RESULT_ERROR_INVALID_ARGUMENT,
                    "zeCommandQueueExecuteCommandLists: command list is not closed",
                )
            })?;
            drop(st);
            batches.push(cmds);
            lists.push(l);
        }
        for l in &lists {
            l.inflight.fetch_add(1, Ordering::SeqCst);
        }
        if let Some(f) = &fence {
            f.flag.reset();
        }
        let job: Job = Box::new(move |w| {
            let mut r = Ok(());
            for b in &batches {
                if let Err(e) = run_commands(b, w) {
                    r = Err(e);
                }
            }
            for l in &lists {
                l.inflight.fetch_sub(1, Ordering::SeqCst);
            }
            if let Some(f) = &fence {
                f.flag.set();
            }
            r
        });
        let seq = q.exec.submit(job)?;
        if q.sync {
            q.exec.wait(Some(seq), u64::MAX)?;
        }
        Ok(())
    })
}

pub(crate) unsafe extern "C" fn queue_synchronize(
    h: ze_command_queue_handle_t,
    timeout: u64,
) -> ze_result_t {
    entry(|| {
        let q = QUEUES.get(h.0)?;
        q.exec.wait(None, timeout)
    })
}

// ---------------------------------------------------------------------------------------------- lists

struct ListState {
    cmds: Vec<Command>,
    /// Set by close: the recorded commands, shared with executions.
    frozen: Option<Arc<Vec<Command>>>,
}

struct Immediate {
    exec: Executor,
    sync: bool,
}

/// A command list.
pub struct CommandList {
    /// Context.
    pub ctx: Arc<Context>,
    /// Device.
    pub device: Arc<Device>,
    /// Group ordinal.
    pub ordinal: u32,
    immediate: Option<Immediate>,
    state: Mutex<ListState>,
    inflight: Arc<AtomicUsize>,
}

impl CommandList {
    fn busy(&self) -> bool {
        let deadline = std::time::Instant::now() + std::time::Duration::from_millis(200);
        while self.inflight.load(Ordering::SeqCst) != 0 {
            if std::time::Instant::now() >= deadline {
                return true;
            }
            std::thread::sleep(std::time::Duration::from_micros(200));
        }
        self.immediate.as_ref().is_some_and(|i| !i.exec.idle())
    }

    /// Appends commands (regular list) or runs them (immediate list).
    fn append(&self, cmds: Vec<Command>) -> ZeResult {
        match &self.immediate {
            None => {
                let mut st = lock(&self.state);
                if st.frozen.is_some() {
                    return Err(fail(
                        ZE_RESULT_ERROR_INVALID_ARGUMENT,
                        "append to a closed command list (zeCommandListReset first)",
                    ));
                }
                st.cmds.extend(cmds);
                Ok(())
            }
            Some(imm) => {
                let seq = imm.exec.submit(Box::new(move |w| run_commands(&cmds, w)))?;
                if imm.sync {
                    imm.exec.wait(Some(seq), u64::MAX)?;
                }
                Ok(())
            }
        }
    }

    fn progress(&self) -> String {
        match &self.immediate {
            Some(i) => format!(
                "{} of {} submissions done",
                lock(&i.exec.shared.done),
                lock(&i.exec.submitted)
            ),
            None => format!(
                "{} executions in flight",
                self.inflight.load(Ordering::SeqCst)
            ),
        }
    }

    fn group(&self) -> (u32, usize, u32) {
        QUEUE_GROUPS[self.ordinal as usize]
    }
}

/// Resolves a command list handle.
pub fn list(h: ze_command_list_handle_t) -> ZeResult<Arc<CommandList>> {
    LISTS.get(h.0)
}

pub(crate) unsafe extern "C" fn list_create(
    hctx: ze_context_handle_t,
    hdev: ze_device_handle_t,
    desc: *const ze_command_list_desc_t,
    ph: *mut ze_command_list_handle_t,
) -> ze_result_t {
    entry(|| {
        let ctx = context(hctx)?;
        let dev = device(hdev)?;
        // SAFETY: caller's descriptor.
        let d = unsafe { read_desc(desc, &[])? };
        if d.commandQueueGroupOrdinal as usize >= QUEUE_GROUPS.len() {
            return Err(fail(
                ZE_RESULT_ERROR_INVALID_ARGUMENT,
                format_args!("command queue group ordinal {}", d.commandQueueGroupOrdinal),
            ));
        }
        check_flags(d.flags, 0xf, "ze_command_list_desc_t.flags")?;
        nn_mut(ph)?;
        let l = Arc::new(CommandList {
            ctx,
            device: dev,
            ordinal: d.commandQueueGroupOrdinal,
            immediate: None,
            state: Mutex::new(ListState {
                cmds: Vec::new(),
                frozen: None,
            }),
            inflight: Arc::new(AtomicUsize::new(0)),
        });
        // SAFETY: checked non-null.
        unsafe { out(ph, ze_command_list_handle_t(LISTS.insert(l))) }
    })
}

pub(crate) unsafe extern "C" fn list_create_immediate(
    hctx: ze_context_handle_t,
    hdev: ze_device_handle_t,
    desc: *const ze_command_queue_desc_t,
    ph: *mut ze_command_list_handle_t,
) -> ze_result_t {
    entry(|| {
        let ctx = context(hctx)?;
        let dev = device(hdev)?;
        // SAFETY: caller's descriptor.
        let (ordinal, sync, engine) = unsafe { queue_desc(desc)? };
        nn_mut(ph)?;
        let l = Arc::new(CommandList {
            ctx,
            device: dev,
            ordinal,
            immediate: Some(Immediate {
                exec: Executor::new("ze-emu-immediate", engine)?,
                sync,
            }),
            state: Mutex::new(ListState {
                cmds: Vec::new(),
                frozen: None,
            }),
            inflight: Arc::new(AtomicUsize::new(0)),
        });
        // SAFETY: checked non-null.
        unsafe { out(ph, ze_command_list_handle_t(LISTS.insert(l))) }
    })
}

pub(crate) unsafe extern "C" fn list_destroy(h: ze_command_list_handle_t) -> ze_result_t {
    entry(|| {
        LISTS
            .remove_if(h.0, |l| {
                if l.busy() {
                    Err(fail(
                        ZE_RESULT_ERROR_HANDLE_OBJECT_IN_USE,
                        format_args!(
                            "zeCommandListDestroy: the list is still executing ({})",
                            l.progress()
                        ),
                    ))
                } else {
                    Ok(())
                }
            })
            .map(|_| ())
    })
}

pub(crate) unsafe extern "C" fn list_close(h: ze_command_list_handle_t) -> ze_result_t {
    entry(|| {
        let l = list(h)?;
        if l.immediate.is_some() {
            return Err(fail(
                ZE_RESULT_ERROR_INVALID_ARGUMENT,
                "zeCommandListClose on an immediate command list",
            ));
        }
        let mut st = lock(&l.state);
        if st.frozen.is_some() {
            return Err(fail(
                ZE_RESULT_ERROR_INVALID_ARGUMENT,
                "zeCommandListClose: list already closed",
            ));
        }
        let cmds = std::mem::take(&mut st.cmds);
        st.frozen = Some(Arc::new(cmds));
        Ok(())
    })
}

pub(crate) unsafe extern "C" fn list_reset(h: ze_command_list_handle_t) -> ze_result_t {
    entry(|| {
        let l = list(h)?;
        if l.busy() {
            return Err(fail(
                ZE_RESULT_ERROR_HANDLE_OBJECT_IN_USE,
                "zeCommandListReset: the list is still executing",
            ));
        }
        let mut st = lock(&l.state);
        st.cmds.clear();
        st.frozen = None;
        Ok(())
    })
}

fn same_context(l: &CommandList, e: &Event) -> ZeResult {
    if Arc::ptr_eq(&l.ctx, &e.pool.ctx) {
        Ok(())
    } else {
        Err(fail(
            ZE_RESULT_ERROR_INVALID_ARGUMENT,
            "event belongs to another context than the command list",
        ))
    }
}

/// Resolves the wait list and signal event of an append into commands around `core`.
///
/// # Safety
/// `ph` null or valid for `n` handles.
unsafe fn around(
    l: &CommandList,
    core: Vec<Command>,
    hsignal: ze_event_handle_t,
    n: u32,
    ph: *mut ze_event_handle_t,
) -> ZeResult<Vec<Command>> {
    let mut v = Vec::with_capacity(core.len() + 2);
    if n > 0 {
        if ph.is_null() {
            return Err(ZE_RESULT_ERROR_INVALID_SIZE);
        }
        let mut evs = Vec::with_capacity(n as usize);
        for i in 0..n as usize {
            // SAFETY: caller guarantee.
            let e = EVENTS.get(unsafe { *ph.add(i) }.0)?;
            same_context(l, &e)?;
            evs.push(e);
        }
        v.push(Command::Wait(evs));
    }
    let signal = EVENTS.get_opt(hsignal.0)?;
    if let Some(e) = &signal {
        same_context(l, e)?;
    }
    v.extend(core);
    if let Some(e) = signal {
        v.push(Command::Signal(e));
    }
    Ok(v)
}

pub(crate) unsafe extern "C" fn list_append_barrier(
    h: ze_command_list_handle_t,
    hsignal: ze_event_handle_t,
    n: u32,
    ph: *mut ze_event_handle_t,
) -> ze_result_t {
    entry(|| {
        let l = list(h)?;
        // SAFETY: caller's wait list.
        let cmds = unsafe { around(&l, Vec::new(), hsignal, n, ph)? };
        l.append(cmds)
    })
}

pub(crate) unsafe extern "C" fn list_append_memory_copy(
    h: ze_command_list_handle_t,
    dst: *mut c_void,
    src: *const c_void,
    size: usize,
    hsignal: ze_event_handle_t,
    n: u32,
    ph: *mut ze_event_handle_t,
) -> ze_result_t {
    entry(|| {
        let l = list(h)?;
        nn(dst)?;
        nn(src)?;
        let (d, s) = (dst as usize, src as usize);
        if d.checked_add(size).is_none() || s.checked_add(size).is_none() {
            return Err(ZE_RESULT_ERROR_INVALID_SIZE);
        }
        if size > 0 && d < s + size && s < d + size {
            return Err(ZE_RESULT_ERROR_OVERLAPPING_REGIONS);
        }
        // SAFETY: caller's wait list.
        let cmds = unsafe {
            around(
                &l,
                vec![Command::Copy {
                    dst: d,
                    src: s,
                    n: size,
                }],
                hsignal,
                n,
                ph,
            )?
        };
        l.append(cmds)
    })
}

#[allow(clippy::too_many_arguments)]
pub(crate) unsafe extern "C" fn list_append_memory_fill(
    h: ze_command_list_handle_t,
    ptr: *mut c_void,
    pattern: *const c_void,
    pattern_size: usize,
    size: usize,
    hsignal: ze_event_handle_t,
    n: u32,
    ph: *mut ze_event_handle_t,
) -> ze_result_t {
    entry(|| {
        let l = list(h)?;
        nn(ptr)?;
        nn(pattern)?;
        let max = l.group().1;
        if pattern_size == 0 || !pattern_size.is_power_of_two() || pattern_size > max {
            return Err(fail(
                ZE_RESULT_ERROR_INVALID_SIZE,
                format_args!(
                    "fill pattern size {pattern_size} (power of two up to {max} on group {})",
                    l.ordinal
                ),
            ));
        }
        if (ptr as usize).checked_add(size).is_none() {
            return Err(ZE_RESULT_ERROR_INVALID_SIZE);
        }
        // SAFETY: the caller provides `pattern_size` readable bytes.
        let pat =
            unsafe { std::slice::from_raw_parts(pattern as *const u8, pattern_size) }.to_vec();
        // SAFETY: caller's wait list.
        let cmds = unsafe {
            around(
                &l,
                vec![Command::Fill {
                    dst: ptr as usize,
                    pattern: pat,
                    size,
                }],
                hsignal,
                n,
                ph,
            )?
        };
        l.append(cmds)
    })
}

pub(crate) unsafe extern "C" fn list_append_signal_event(
    h: ze_command_list_handle_t,
    he: ze_event_handle_t,
) -> ze_result_t {
    entry(|| {
        let l = list(h)?;
        let e = EVENTS.get(he.0)?;
        same_context(&l, &e)?;
        l.append(vec![Command::Signal(e)])
    })
}

pub(crate) unsafe extern "C" fn list_append_wait_on_events(
    h: ze_command_list_handle_t,
    n: u32,
    ph: *mut ze_event_handle_t,
) -> ze_result_t {
    entry(|| {
        let l = list(h)?;
        if n == 0 {
            return Err(ZE_RESULT_ERROR_INVALID_SIZE);
        }
        // SAFETY: caller's wait list.
        let cmds = unsafe { around(&l, Vec::new(), ze_event_handle_t::null(), n, ph)? };
        l.append(cmds)
    })
}

pub(crate) unsafe extern "C" fn list_append_event_reset(
    h: ze_command_list_handle_t,
    he: ze_event_handle_t,
) -> ze_result_t {
    entry(|| {
        let l = list(h)?;
        let e = EVENTS.get(he.0)?;
        same_context(&l, &e)?;
        l.append(vec![Command::Reset(e)])
    })
}

pub(crate) unsafe extern "C" fn list_append_launch_kernel(
    h: ze_command_list_handle_t,
    hk: ze_kernel_handle_t,
    args: *const ze_group_count_t,
    hsignal: ze_event_handle_t,
    n: u32,
    ph: *mut ze_event_handle_t,
) -> ze_result_t {
    entry(|| {
        let l = list(h)?;
        let k = crate::module::kernel(hk)?;
        let gc = nn(args)?;
        if l.group().0 & ZE_COMMAND_QUEUE_GROUP_PROPERTY_FLAG_COMPUTE == 0 {
            return Err(fail(
                ZE_RESULT_ERROR_INVALID_COMMAND_LIST_TYPE,
                format_args!("kernel launch on copy-only group {}", l.ordinal),
            ));
        }
        // SAFETY: non-null; the caller provides a readable group count.
        let gc = unsafe { *gc };
        if !Arc::ptr_eq(&k.module().ctx, &l.ctx) || !Arc::ptr_eq(&k.module().device, &l.device) {
            return Err(fail(
                ZE_RESULT_ERROR_INVALID_ARGUMENT,
                "kernel's module was built for another context or device",
            ));
        }
        let launch = crate::module::snapshot(&k, gc)?;
        // SAFETY: caller's wait list.
        let cmds = unsafe { around(&l, vec![Command::Launch(Arc::new(launch))], hsignal, n, ph)? };
        l.append(cmds)
    })
}

/// A launch whose work-groups may wait on each other: refused (`ZE_RESULT_ERROR_INVALID_ARGUMENT`) when more
/// groups are asked for than `zeKernelSuggestMaxCooperativeGroupCount` reports resident at once; otherwise the
/// same launch as `zeCommandListAppendLaunchKernel` (those groups do run concurrently on the CPU runtime).
pub(crate) unsafe extern "C" fn list_append_launch_cooperative_kernel(
    h: ze_command_list_handle_t,
    hk: ze_kernel_handle_t,
    args: *const ze_group_count_t,
    hsignal: ze_event_handle_t,
    n: u32,
    ph: *mut ze_event_handle_t,
) -> ze_result_t {
    let check = || -> ZeResult<()> {
        crate::module::kernel(hk)?;
        let gc = nn(args)?;
        // SAFETY: non-null; the caller provides a readable group count.
        let gc = unsafe { *gc };
        let total =
            u64::from(gc.groupCountX) * u64::from(gc.groupCountY) * u64::from(gc.groupCountZ);
        let max = crate::module::max_resident_groups()?;
        if total > u64::from(max) {
            return Err(fail(
                ZE_RESULT_ERROR_INVALID_ARGUMENT,
                format_args!(
                    "cooperative launch of {total} work-groups; at most {max} are resident at once \
                     (zeKernelSuggestMaxCooperativeGroupCount)"
                ),
            ));
        }
        Ok(())
    };
    let r = entry(check);
    if r != ZE_RESULT_SUCCESS {
        return r;
    }
    // SAFETY: the caller's arguments, forwarded.
    unsafe { list_append_launch_kernel(h, hk, args, hsignal, n, ph) }
}

// ---------------------------------------------------------------------------------------------- events

/// An event pool.
pub struct EventPool {
    /// Context.
    pub ctx: Arc<Context>,
    used: Mutex<Vec<bool>>,
}

/// An event.
pub struct Event {
    pool: Arc<EventPool>,
    index: u32,
    flag: Flag,
}

pub(crate) unsafe extern "C" fn pool_create(
    hctx: ze_context_handle_t,
    desc: *const ze_event_pool_desc_t,
    ndev: u32,
    phdev: *mut ze_device_handle_t,
    ph: *mut ze_event_pool_handle_t,
) -> ze_result_t {
    entry(|| {
        let ctx = context(hctx)?;
        // SAFETY: caller's descriptor.
        let d = unsafe { read_desc(desc, &[])? };
        check_flags(d.flags, 0x7, "ze_event_pool_desc_t.flags")?;
        if d.count == 0 {
            return Err(ZE_RESULT_ERROR_INVALID_SIZE);
        }
        if ndev > 0 {
            if phdev.is_null() {
                return Err(ZE_RESULT_ERROR_INVALID_SIZE);
            }
            for i in 0..ndev as usize {
                // SAFETY: the caller provides `ndev` device handles.
                device(unsafe { *phdev.add(i) })?;
            }
        }
        nn_mut(ph)?;
        let p = Arc::new(EventPool {
            ctx,
            used: Mutex::new(vec![false; d.count as usize]),
        });
        // SAFETY: checked non-null.
        unsafe { out(ph, ze_event_pool_handle_t(POOLS.insert(p))) }
    })
}

pub(crate) unsafe extern "C" fn pool_destroy(h: ze_event_pool_handle_t) -> ze_result_t {
    entry(|| {
        POOLS
            .remove_if(h.0, |p| {
                if lock(&p.used).iter().any(|u| *u) {
                    Err(fail(
                        ZE_RESULT_ERROR_HANDLE_OBJECT_IN_USE,
                        "zeEventPoolDestroy: events of the pool are still alive",
                    ))
                } else {
                    Ok(())
                }
            })
            .map(|_| ())
    })
}

pub(crate) unsafe extern "C" fn event_create(
    h: ze_event_pool_handle_t,
    desc: *const ze_event_desc_t,
    ph: *mut ze_event_handle_t,
) -> ze_result_t {
    entry(|| {
        let pool = POOLS.get(h.0)?;
        // SAFETY: caller's descriptor.
        let d = unsafe { read_desc(desc, &[])? };
        check_flags(d.signal, 0x7, "ze_event_desc_t.signal")?;
        check_flags(d.wait, 0x7, "ze_event_desc_t.wait")?;
        nn_mut(ph)?;
        {
            let mut used = lock(&pool.used);
            let n = used.len();
            let slot = used.get_mut(d.index as usize).ok_or_else(|| {
                fail(
                    ZE_RESULT_ERROR_INVALID_ARGUMENT,
                    format_args!("event index {} (pool has {n})", d.index),
                )
            })?;
            if *slot {
                return Err(fail(
                    ZE_RESULT_ERROR_INVALID_ARGUMENT,
                    format_args!("event index {} is already in use", d.index),
                ));
            }
            *slot = true;
        }
        let e = Arc::new(Event {
            pool,
            index: d.index,
            flag: Flag::new(false),
        });
        // SAFETY: checked non-null.
        unsafe { out(ph, ze_event_handle_t(EVENTS.insert(e))) }
    })
}

pub(crate) unsafe extern "C" fn event_destroy(h: ze_event_handle_t) -> ze_result_t {
    entry(|| {
        let e = EVENTS.remove_if(h.0, |_| Ok(()))?;
        lock(&e.pool.used)[e.index as usize] = false;
        Ok(())
    })
}

pub(crate) unsafe extern "C" fn event_host_signal(h: ze_event_handle_t) -> ze_result_t {
    entry(|| {
        let e = EVENTS.get(h.0)?;
        std::sync::atomic::fence(Ordering::SeqCst);
        e.flag.set();
        Ok(())
    })
}

pub(crate) unsafe extern "C" fn event_host_synchronize(
    h: ze_event_handle_t,
    timeout: u64,
) -> ze_result_t {
    entry(|| {
        let e = EVENTS.get(h.0)?;
        if e.flag.wait(timeout) {
            std::sync::atomic::fence(Ordering::SeqCst);
            Ok(())
        } else {
            Err(ZE_RESULT_NOT_READY)
        }
    })
}

pub(crate) unsafe extern "C" fn event_query_status(h: ze_event_handle_t) -> ze_result_t {
    entry(|| {
        let e = EVENTS.get(h.0)?;
        if e.flag.is_set() {
            Ok(())
        } else {
            Err(ZE_RESULT_NOT_READY)
        }
    })
}

pub(crate) unsafe extern "C" fn event_host_reset(h: ze_event_handle_t) -> ze_result_t {
    entry(|| {
        EVENTS.get(h.0)?.flag.reset();
        Ok(())
    })
}

// ---------------------------------------------------------------------------------------------- fences

/// A fence.
pub struct Fence {
    queue: usize,
    flag: Flag,
}

pub(crate) unsafe extern "C" fn fence_create(
    hq: ze_command_queue_handle_t,
    desc: *const ze_fence_desc_t,
    ph: *mut ze_fence_handle_t,
) -> ze_result_t {
    entry(|| {
        QUEUES.get(hq.0)?;
        // SAFETY: caller's descriptor.
        let d = unsafe { read_desc(desc, &[])? };
        check_flags(d.flags, ZE_FENCE_FLAG_SIGNALED, "ze_fence_desc_t.flags")?;
        nn_mut(ph)?;
        let f = Arc::new(Fence {
            queue: hq.0 as usize,
            flag: Flag::new(d.flags & ZE_FENCE_FLAG_SIGNALED != 0),
        });
        // SAFETY: checked non-null.
        unsafe { out(ph, ze_fence_handle_t(FENCES.insert(f))) }
    })
}

pub(crate) unsafe extern "C" fn fence_destroy(h: ze_fence_handle_t) -> ze_result_t {
    entry(|| FENCES.remove_if(h.0, |_| Ok(())).map(|_| ()))
}

pub(crate) unsafe extern "C" fn fence_host_synchronize(
    h: ze_fence_handle_t,
    timeout: u64,
) -> ze_result_t {
    entry(|| {
        let f = FENCES.get(h.0)?;
        if f.flag.wait(timeout) {
            Ok(())
        } else {
            Err(ZE_RESULT_NOT_READY)
        }
    })
}

pub(crate) unsafe extern "C" fn fence_query_status(h: ze_fence_handle_t) -> ze_result_t {
    entry(|| {
        if FENCES.get(h.0)?.flag.is_set() {
            Ok(())
        } else {
            Err(ZE_RESULT_NOT_READY)
        }
    })
}

pub(crate) unsafe extern "C" fn fence_reset(h: ze_fence_handle_t) -> ze_result_t {
    entry(|| {
        FENCES.get(h.0)?.flag.reset();
        Ok(())
    })
}
