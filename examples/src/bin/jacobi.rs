//! 2-D Jacobi relaxation with halo exchange. The global NX x NY grid is split into horizontal strips, one per PE;
//! each iteration every PE puts its boundary rows into its neighbours' halo rows, barriers, and relaxes. PE 0
//! gathers the result and compares it with the same iteration computed serially.
//!
//! `xpushmem-run -n 4 target/release/jacobi`

const NX: usize = 64;
const NY: usize = 96;
const ITERS: usize = 50;

fn boundary(x: usize, y: usize) -> f64 {
    if y == 0 {
        100.0
    } else if x == 0 {
        (y % 7) as f64
    } else {
        0.0
    }
}

fn relax(grid: &[f64], rows: usize, out: &mut [f64], first_global_row: usize) {
    for r in 1..=rows {
        let gy = first_global_row + r - 1;
        for x in 0..NX {
            let i = r * NX + x;
            out[i] = if gy == 0 || gy == NY - 1 || x == 0 || x == NX - 1 {
                grid[i]
            } else {
                0.25 * (grid[i - 1] + grid[i + 1] + grid[i - NX] + grid[i + NX])
            };
        }
    }
}

fn serial() -> Vec<f64> {
    let mut g = vec![0.0; (NY + 2) * NX];
    for y in 0..NY {
        for x in 0..NX {
            g[(y + 1) * NX + x] = boundary(x, y);
        }
    }
    let mut next = g.clone();
    for _ in 0..ITERS {
        relax(&g, NY, &mut next, 0);
        std::mem::swap(&mut g, &mut next);
    }
    g[NX..(NY + 1) * NX].to_vec()
}

fn main() -> xpushmem::Result<()> {
    let sh = xpushmem::init()?;
    let (me, n) = (sh.my_pe(), sh.n_pes());
    if NY % n != 0 {
        eprintln!("jacobi: {NY} rows do not split over {n} PEs");
        std::process::exit(2);
    }
    let rows = NY / n;
    let y0 = me * rows;
    // Local strip with one halo row above and below.
    let grid = sh.calloc::<f64>((rows + 2) * NX)?;
    let mut local = vec![0.0; (rows + 2) * NX];
    for r in 0..rows {
        for x in 0..NX {
            local[(r + 1) * NX + x] = boundary(x, y0 + r);
        }
    }
    let mut next = local.clone();
    for _ in 0..ITERS {
        // Publish my boundary rows into the neighbours' halos, then wait for theirs.
        if me > 0 {
            sh.put(
                grid.slice((rows + 1) * NX..(rows + 2) * NX)?,
                &local[NX..2 * NX],
                me - 1,
            )?;
        }
        if me + 1 < n {
            sh.put(
                grid.slice(0..NX)?,
                &local[rows * NX..(rows + 1) * NX],
                me + 1,
            )?;
        }
        sh.barrier_all()?;
        let mut halo = vec![0.0; NX];
        if me > 0 {
            sh.get(&mut halo, grid.slice(0..NX)?, me)?;
            local[..NX].copy_from_slice(&halo);
        }
        if me + 1 < n {
            sh.get(&mut halo, grid.slice((rows + 1) * NX..(rows + 2) * NX)?, me)?;
            local[(rows + 1) * NX..].copy_from_slice(&halo);
        }
        relax(&local, rows, &mut next, y0);
        std::mem::swap(&mut local, &mut next);
        sh.barrier_all()?; // halos are rewritten only after everyone has read them
    }
    // Gather the strips on PE 0.
    let all = sh.calloc::<f64>(NY * NX)?;
    sh.put(
        all.slice(y0 * NX..(y0 + rows) * NX)?,
        &local[NX..(rows + 1) * NX],
        0,
    )?;
    sh.barrier_all()?;
    if me == 0 {
        let mut got = vec![0.0; NY * NX];
        sh.get(&mut got, all, 0)?;
        let want = serial();
        let err = got
            .iter()
            .zip(&want)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0, f64::max);
        if err > 1e-12 {
            eprintln!("jacobi: max deviation from the serial result {err:e}");
            std::process::exit(1);
        }
        println!("jacobi: {NX}x{NY} grid, {ITERS} iterations on {n} PEs matches the serial result (max error {err:e}): ok");
    }
    sh.finalize()
}
