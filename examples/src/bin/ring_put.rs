//! Ring put: a token of 1 MiB travels all the way round the ring; each PE adds its number to every element and
//! passes it on with a put and a signal. PE 0 checks the final token against the closed-form sum.
//!
//! `xpushmem-run -n 4 target/release/ring_put`

use xpushmem::{Cmp, SignalOp};

const LEN: usize = 1 << 17; // 128 Ki u64 = 1 MiB

fn main() -> xpushmem::Result<()> {
    let sh = xpushmem::init()?;
    let (me, n) = (sh.my_pe(), sh.n_pes());
    let token = sh.calloc::<u64>(LEN)?;
    let arrived = sh.calloc::<u64>(1)?.at(0)?;
    let right = (me + 1) % n;
    let mut buf: Vec<u64> = if me == 0 {
        (0..LEN as u64).collect()
    } else {
        vec![0; LEN]
    };
    if me != 0 {
        sh.signal_wait_until(arrived, Cmp::Eq, 1)?;
        sh.get(&mut buf, token, me)?;
    }
    buf.iter_mut().for_each(|v| *v += me as u64);
    sh.put_signal(token, &buf, arrived, 1, SignalOp::Set, right)?;
    if me == 0 {
        sh.signal_wait_until(arrived, Cmp::Eq, 1)?;
        sh.get(&mut buf, token, me)?;
        let add = (n * (n - 1) / 2) as u64;
        let bad = buf
            .iter()
            .enumerate()
            .filter(|(i, &v)| v != *i as u64 + add)
            .count();
        if bad > 0 {
            eprintln!("ring_put: {bad} of {LEN} elements wrong after the round trip");
            std::process::exit(1);
        }
        println!("ring_put: 1 MiB token went round {n} PEs; every element = index + {add}: ok");
    }
    sh.finalize()
}
