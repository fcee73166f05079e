//! A put_signal pipeline: PE 0 produces CHUNKS chunks, every PE in turn transforms each chunk (adds its number) and
//! forwards it to the next PE with `put_signal` (ADD counts chunks), while flow control (`atomic_set` of a credit
//! word) keeps at most DEPTH chunks in flight. The last PE checks every chunk.
//!
//! `xpushmem-run -n 4 target/release/put_signal_pipeline`

use xpushmem::{Cmp, SignalOp};

const CHUNKS: u64 = 64;
const DEPTH: usize = 4;
const LEN: usize = 4096;

fn main() -> xpushmem::Result<()> {
    let sh = xpushmem::init()?;
    let (me, n) = (sh.my_pe(), sh.n_pes());
    let slots = sh.calloc::<u32>(DEPTH * LEN)?;
    let ready = sh.calloc::<u64>(1)?.at(0)?; // chunks received from the left
    let credit = sh.calloc::<u64>(1)?.at(0)?; // chunks the right neighbour has consumed
    let mut chunk = vec![0u32; LEN];
    let mut checked = 0u64;
    for c in 0..CHUNKS {
        let slot = slots.slice((c as usize % DEPTH) * LEN..(c as usize % DEPTH + 1) * LEN)?;
        if me == 0 {
            chunk
                .iter_mut()
                .enumerate()
                .for_each(|(i, v)| *v = (c as u32) << 16 | i as u32);
        } else {
            sh.signal_wait_until(ready, Cmp::Ge, c + 1)?;
            sh.get(&mut chunk, slot, me)?;
            sh.atomic_set(credit, c + 1, me - 1)?; // the slot may be reused
        }
        chunk
            .iter_mut()
            .for_each(|v| *v = v.wrapping_add(me as u32));
        if me + 1 < n {
            if c >= DEPTH as u64 {
                sh.wait_until(credit, Cmp::Ge, c + 1 - DEPTH as u64)?;
            }
            sh.put_signal(slot, &chunk, ready, 1, SignalOp::Add, me + 1)?;
        } else {
            let add = (n * (n - 1) / 2) as u32;
            let ok = chunk
                .iter()
                .enumerate()
                .all(|(i, &v)| v == ((c as u32) << 16 | i as u32).wrapping_add(add));
            if !ok {
                eprintln!("put_signal_pipeline: chunk {c} corrupted");
                std::process::exit(1);
            }
            checked += 1;
        }
    }
    if me + 1 == n {
        println!("put_signal_pipeline: {checked} chunks through {n} stages, depth {DEPTH}: ok");
    }
    sh.finalize()
}
