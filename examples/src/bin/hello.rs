//! Every PE says hello, then each writes its number into its right neighbour's heap and checks what it received.
//!
//! `xpushmem-run -n 4 target/release/hello`

fn main() -> xpushmem::Result<()> {
    let sh = xpushmem::init()?;
    let (me, n) = (sh.my_pe(), sh.n_pes());
    println!(
        "hello from PE {me} of {n} (node PEs {:?}, bootstrap {})",
        sh.node_pes(),
        sh.bootstrap_name()
    );
    let slot = sh.calloc::<u64>(1)?.at(0)?;
    sh.p(slot, me as u64 + 1000, (me + 1) % n)?;
    sh.barrier_all()?;
    let got = sh.g(slot, me)?;
    let expect = ((me + n - 1) % n) as u64 + 1000;
    if got != expect {
        eprintln!("PE {me}: got {got}, expected {expect}");
        std::process::exit(1);
    }
    println!("PE {me}: received {got} from PE {}: ok", (me + n - 1) % n);
    sh.finalize()
}
