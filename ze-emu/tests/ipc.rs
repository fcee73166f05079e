//! Two-process IPC: the exporter allocates device memory and sends its IPC handle plus the fd (SCM_RIGHTS over
//! a Unix socket) to an importer process, which patches its own fd number into the handle, opens it, checks
//! the exporter's bytes, writes its own with a copy command and reports back; the exporter then sees them.
//! The importer also tries the pidfd_getfd path (skipped with a message where ptrace rules forbid it).

#![allow(clippy::macro_metavars_in_unsafe)] // the ze! macro passes (deliberately invalid) arguments to FFI calls

mod common;
use common::*;
use rustix::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use rustix::net::{
    RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, SendAncillaryBuffer,
    SendAncillaryMessage, SendFlags,
};
use std::ffi::{c_char, c_void};
use std::io::{IoSlice, IoSliceMut, Read, Write};
use std::mem::MaybeUninit;
use std::os::unix::net::UnixStream;
use std::ptr::null_mut;

const SIZE: usize = 1 << 20;
const ROLE: &str = "ZE_EMU_IPC_ROLE";
const SOCK: &str = "ZE_EMU_IPC_SOCK";

fn handle_bytes(h: &ze_ipc_mem_handle_t) -> [u8; 64] {
    let mut b = [0u8; 64];
    for (d, s) in b.iter_mut().zip(h.data.iter()) {
        *d = *s as u8;
    }
    b
}

fn handle_from(b: &[u8; 64]) -> ze_ipc_mem_handle_t {
    let mut h = ze_ipc_mem_handle_t::default();
    for (d, s) in h.data.iter_mut().zip(b.iter()) {
        *d = *s as c_char;
    }
    h
}

fn exporter(env: &Env) {
    let (mine, theirs) = UnixStream::pair().expect("socketpair");
    rustix::io::fcntl_setfd(&theirs, rustix::io::FdFlags::empty()).expect("clear CLOEXEC");

    let p = env.alloc_device(SIZE);
    let imm = env.immediate(0, ZE_COMMAND_QUEUE_MODE_SYNCHRONOUS);
    let pattern = 0xA5A5_A5A5u32;
    ze_ok!(
        env,
        zeCommandListAppendMemoryFill(
            imm,
            p as *mut c_void,
            &pattern as *const u32 as *const c_void,
            4,
            SIZE,
            ze_event_handle_t::null(),
            0,
            null_mut()
        )
    );
    let mut h = ze_ipc_mem_handle_t::default();
    ze_ok!(env, zeMemGetIpcHandle(env.ctx, p as *const c_void, &mut h));
    let bytes = handle_bytes(&h);
    let fd = i32::from_le_bytes(bytes[0..4].try_into().unwrap());

    let mut child = child_command("ipc_two_processes", &Opts::default())
        .env(ROLE, "importer")
        .env(SOCK, theirs.as_raw_fd().to_string())
        .spawn()
        .expect("spawn importer");
    drop(theirs);

    // SAFETY: `fd` is the driver-owned export fd, open for the allocation's lifetime.
    let borrowed = unsafe { rustix::fd::BorrowedFd::borrow_raw(fd) };
    let fds = [borrowed];
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
    let mut cmsg = SendAncillaryBuffer::new(&mut space);
    assert!(cmsg.push(SendAncillaryMessage::ScmRights(&fds)));
    let sent = rustix::net::sendmsg(
        mine.as_fd(),
        &[IoSlice::new(&bytes)],
        &mut cmsg,
        SendFlags::empty(),
    )
    .expect("sendmsg");
    assert_eq!(sent, 64);

    let mut ack = [0u8; 1];
    (&mine).read_exact(&mut ack).expect("importer ack");
    assert_eq!(ack[0], 1, "importer reported failure");
    // The importer copied 0x3C bytes into the second half.
    // SAFETY: live allocation of SIZE bytes.
    let view = unsafe { std::slice::from_raw_parts(p, SIZE) };
    assert!(
        view[..SIZE / 2].iter().all(|b| *b == 0xA5),
        "first half untouched"
    );
    assert!(
        view[SIZE / 2..].iter().all(|b| *b == 0x3C),
        "importer's bytes visible to the exporter"
    );
    (&mine).write_all(&[2]).expect("release importer");
    let st = child.wait().expect("wait importer");
    assert!(st.success(), "importer failed: {st}");
    ze_ok!(env, zeCommandListDestroy(imm));
    ze_ok!(env, zeMemFree(env.ctx, p as *mut c_void));
}

fn importer(env: &Env) {
    let sock_fd: i32 = std::env::var(SOCK).unwrap().parse().unwrap();
    // SAFETY: the exporter passed this inherited socket fd to us; we take ownership once.
    let sock = UnixStream::from(unsafe { OwnedFd::from_raw_fd(sock_fd) });
    let mut bytes = [0u8; 64];
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
    let mut cmsg = RecvAncillaryBuffer::new(&mut space);
    let r = rustix::net::recvmsg(
        sock.as_fd(),
        &mut [IoSliceMut::new(&mut bytes)],
        &mut cmsg,
        RecvFlags::CMSG_CLOEXEC,
    )
    .expect("recvmsg");
    assert_eq!(r.bytes, 64);
    let mut received = None;
    for m in cmsg.drain() {
        if let RecvAncillaryMessage::ScmRights(mut fds) = m {
            received = fds.next();
        }
    }
    let my_fd = received.expect("an fd in SCM_RIGHTS");
    let exporter_fd = i32::from_le_bytes(bytes[0..4].try_into().unwrap());
    // Patch our fd number into the handle, as with Intel's driver.
    bytes[0..4].copy_from_slice(&my_fd.as_raw_fd().to_le_bytes());
    let h = handle_from(&bytes);
    let mut q = null_mut();
    ze_ok!(env, zeMemOpenIpcHandle(env.ctx, env.dev(), h, 0, &mut q));
    drop(my_fd); // the mapping keeps the memory; the importer's fd is its own to close
                 // SAFETY: the mapping is SIZE bytes.
    let view = unsafe { std::slice::from_raw_parts(q as *const u8, SIZE) };
    assert!(
        view.iter().all(|b| *b == 0xA5),
        "exporter's fill visible in the importer"
    );
    let src = vec![0x3Cu8; SIZE / 2];
    let imm = env.immediate(1, ZE_COMMAND_QUEUE_MODE_SYNCHRONOUS);
    // SAFETY: second half of the mapping.
    let dst = unsafe { (q as *mut u8).add(SIZE / 2) } as *mut c_void;
    ze_ok!(
        env,
        zeCommandListAppendMemoryCopy(
            imm,
            dst,
            src.as_ptr() as *const c_void,
            SIZE / 2,
            ze_event_handle_t::null(),
            0,
            null_mut()
        )
    );

    // pidfd_getfd path (needs ptrace permission over the exporter).
    let pid = u32::from_le_bytes(bytes[32..36].try_into().unwrap());
    let via_pidfd = rustix::process::Pid::from_raw(pid as i32)
        .ok_or(rustix::io::Errno::INVAL)
        .and_then(|p| rustix::process::pidfd_open(p, rustix::process::PidfdFlags::empty()))
        .and_then(|pidfd| {
            rustix::process::pidfd_getfd(
                &pidfd,
                exporter_fd,
                rustix::process::PidfdGetfdFlags::empty(),
            )
        });
    match via_pidfd {
        Ok(fd2) => {
            let mut b2 = bytes;
            b2[0..4].copy_from_slice(&fd2.as_raw_fd().to_le_bytes());
            let mut q2 = null_mut();
            ze_ok!(
                env,
                zeMemOpenIpcHandle(env.ctx, env.dev(), handle_from(&b2), 0, &mut q2)
            );
            // SAFETY: mapping of SIZE bytes.
            assert_eq!(unsafe { *(q2 as *const u8).add(SIZE - 1) }, 0x3C);
            ze_ok!(env, zeMemCloseIpcHandle(env.ctx, q2));
            println!("pidfd_getfd path OK");
        }
        Err(e) => println!("pidfd_getfd path skipped: {e} (ptrace restrictions)"),
    }

    (&sock).write_all(&[1]).expect("ack");
    let mut fin = [0u8; 1];
    (&sock).read_exact(&mut fin).expect("exporter done");
    ze_ok!(env, zeMemCloseIpcHandle(env.ctx, q));
    ze_ok!(env, zeCommandListDestroy(imm));
}

emu_test!(ipc_two_processes, |env| {
    if std::env::var(ROLE).is_ok_and(|r| r == "importer") {
        importer(&env);
    } else {
        exporter(&env);
    }
});
