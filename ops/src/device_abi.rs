//! Codes and layouts shared by the op kernels (`ops/device/xpushmem_ops.cl`) and the host side of the device
//! path ([`crate::device`]). The C header `ops/device/xpushmem_ops_abi.h` is generated from this module
//! ([`header`]); a test fails when the committed header drifts (`XPUSHMEM_BLESS=1` rewrites it).

/// Words (`u64`) of the op sync region per PE of the world: `flag[n]`, `payload[n][2][2]`, `sent[n]`, `seen[n]`.
pub const XPO_SYNC_WORDS_PER_PE: u64 = 7;
/// Words (`u64`) of one op's status record: `done` (the op's sequence number once finished), `code`, `a`, `b`,
/// `c`, then padding.
pub const XPO_STATUS_WORDS: u64 = 8;
/// Work-items of the one work-group each op kernel runs.
pub const XPO_GROUP_SIZE: u64 = 64;

/// `all_to_all_vdev`.
pub const XPO_MODE_VDEV: u64 = 1;
/// `all_to_all_vdev_2d`.
pub const XPO_MODE_2D: u64 = 2;
/// `all_to_all_vdev_2d_offset`.
pub const XPO_MODE_2D_OFFSET: u64 = 3;

/// `nvshmem_put`.
pub const XPO_RMA_PUT: u64 = 1;
/// `nvshmem_get`.
pub const XPO_RMA_GET: u64 = 2;
/// `nvshmem_put_with_signal`.
pub const XPO_RMA_PUT_SIGNAL: u64 = 3;
/// `nvshmem_wait_for_signal`.
pub const XPO_RMA_WAIT_SIGNAL: u64 = 4;

/// float32 tiles.
pub const XPO_DTYPE_F32: u64 = 0;
/// float16 tiles.
pub const XPO_DTYPE_F16: u64 = 1;
/// bfloat16 tiles.
pub const XPO_DTYPE_BF16: u64 = 2;

/// symm_mem `one_shot_all_reduce[_out]`.
pub const XPO_SYMM_ONE_SHOT: u64 = 1;
/// symm_mem `one_shot_all_reduce_copy[_out]` (the local input is copied into the symmetric buffer first).
pub const XPO_SYMM_ONE_SHOT_COPY: u64 = 2;
/// symm_mem `two_shot_all_reduce_` (in place).
pub const XPO_SYMM_TWO_SHOT_INPLACE: u64 = 3;
/// symm_mem `two_shot_all_reduce_out`.
pub const XPO_SYMM_TWO_SHOT_OUT: u64 = 4;
/// symm_mem `reduce_scatter_out` (flat or `split_last_dim`).
pub const XPO_SYMM_REDUCE_SCATTER: u64 = 5;
/// symm_mem `memset32_`.
pub const XPO_WRITE32_MEMSET: u64 = 1;
/// symm_mem `stream_write_value32_`.
pub const XPO_WRITE32_STREAM: u64 = 2;

/// Success.
pub const XPO_OK: u64 = 0;
/// This rank's arguments were rejected on the host before the launch (the host keeps the error).
pub const XPO_ERR_HOST_REJECT: u64 = 1;
/// A negative split: `a` = index, `b` = value.
pub const XPO_ERR_SPLIT_NEGATIVE: u64 = 2;
/// The splits' sum overflows int64.
pub const XPO_ERR_SPLIT_OVERFLOW: u64 = 3;
/// The splits sum to more rows than the input has: `a` = sum, `b` = rows.
pub const XPO_ERR_SPLIT_EXCEEDS: u64 = 4;
/// `_2d_offset`: a negative split or offset: `a` = column, `b` = split, `c` = offset.
pub const XPO_ERR_CHUNK_NEGATIVE: u64 = 5;
/// `_2d_offset`: a chunk runs past the input: `a` = column, `b` = split, `c` = offset.
pub const XPO_ERR_CHUNK_PAST_INPUT: u64 = 6;
/// A received count is negative: `a` = the count.
pub const XPO_ERR_RECV_NEGATIVE: u64 = 7;
/// The received row counts overflow int64.
pub const XPO_ERR_RECV_OVERFLOW: u64 = 8;
/// The received chunks need more rows than `out` has: `a` = rows needed, `b` = rows of `out`.
pub const XPO_ERR_OUT_TOO_SMALL: u64 = 9;
/// Another rank rejected its arguments: `a` = its group rank, `b` = its PE.
pub const XPO_ERR_PEER_FAILED: u64 = 10;
/// Another rank passed different symmetric arguments: `a` = its group rank, `b` = its PE.
pub const XPO_ERR_MISMATCH: u64 = 11;
/// A device-side wait gave up (the module's error word names the call): `a` = the PE waited for.
pub const XPO_ERR_TIMEOUT: u64 = 12;
/// A device library call failed (recorded in the module's error word): `a` = its code.
pub const XPO_ERR_DEVICE: u64 = 13;
/// A signal-pad CAS of the symm_mem handle gave up: `a` = peer rank, `b` = channel.
pub const XPO_ERR_PAD_TIMEOUT: u64 = 14;
/// Expert-parallel routing: an expert id out of range: `a` = the id, `b` = token, `c` = column.
pub const XPO_ERR_EP_EXPERT: u64 = 15;
/// Expert-parallel routing: a receive overflow: `a` = the rank, `b` = its rows, `c` = the maximum.
pub const XPO_ERR_EP_OVERFLOW: u64 = 16;

/// `xpo_pad` mode: the handle's barrier.
pub const XPO_PAD_BARRIER: u64 = 1;
/// `xpo_pad` mode: put_signal.
pub const XPO_PAD_PUT_SIGNAL: u64 = 2;
/// `xpo_pad` mode: wait_signal.
pub const XPO_PAD_WAIT_SIGNAL: u64 = 3;

/// Every constant, for the generated header: (name, value, doc).
pub const ALL: &[(&str, u64, &str)] = &[
    (
        "XPO_SYNC_WORDS_PER_PE",
        XPO_SYNC_WORDS_PER_PE,
        "u64 words of the op sync region per PE",
    ),
    (
        "XPO_STATUS_WORDS",
        XPO_STATUS_WORDS,
        "u64 words of a status record",
    ),
    (
        "XPO_GROUP_SIZE",
        XPO_GROUP_SIZE,
        "work-items of an op kernel's work-group",
    ),
    ("XPO_MODE_VDEV", XPO_MODE_VDEV, "all_to_all_vdev"),
    ("XPO_MODE_2D", XPO_MODE_2D, "all_to_all_vdev_2d"),
    (
        "XPO_MODE_2D_OFFSET",
        XPO_MODE_2D_OFFSET,
        "all_to_all_vdev_2d_offset",
    ),
    ("XPO_RMA_PUT", XPO_RMA_PUT, "nvshmem_put"),
    ("XPO_RMA_GET", XPO_RMA_GET, "nvshmem_get"),
    (
        "XPO_RMA_PUT_SIGNAL",
        XPO_RMA_PUT_SIGNAL,
        "nvshmem_put_with_signal",
    ),
    (
        "XPO_RMA_WAIT_SIGNAL",
        XPO_RMA_WAIT_SIGNAL,
        "nvshmem_wait_for_signal",
    ),
    ("XPO_DTYPE_F32", XPO_DTYPE_F32, "float32 tiles"),
    ("XPO_DTYPE_F16", XPO_DTYPE_F16, "float16 tiles"),
    ("XPO_DTYPE_BF16", XPO_DTYPE_BF16, "bfloat16 tiles"),
    (
        "XPO_SYMM_ONE_SHOT",
        XPO_SYMM_ONE_SHOT,
        "one_shot_all_reduce",
    ),
    (
        "XPO_SYMM_ONE_SHOT_COPY",
        XPO_SYMM_ONE_SHOT_COPY,
        "one_shot_all_reduce_copy",
    ),
    (
        "XPO_SYMM_TWO_SHOT_INPLACE",
        XPO_SYMM_TWO_SHOT_INPLACE,
        "two_shot_all_reduce_",
    ),
    (
        "XPO_SYMM_TWO_SHOT_OUT",
        XPO_SYMM_TWO_SHOT_OUT,
        "two_shot_all_reduce_out",
    ),
    (
        "XPO_SYMM_REDUCE_SCATTER",
        XPO_SYMM_REDUCE_SCATTER,
        "reduce_scatter_out",
    ),
    ("XPO_WRITE32_MEMSET", XPO_WRITE32_MEMSET, "memset32_"),
    (
        "XPO_WRITE32_STREAM",
        XPO_WRITE32_STREAM,
        "stream_write_value32_",
    ),
    ("XPO_OK", XPO_OK, "success"),
    (
        "XPO_ERR_HOST_REJECT",
        XPO_ERR_HOST_REJECT,
        "arguments rejected on the host",
    ),
    (
        "XPO_ERR_SPLIT_NEGATIVE",
        XPO_ERR_SPLIT_NEGATIVE,
        "a = index, b = value",
    ),
    (
        "XPO_ERR_SPLIT_OVERFLOW",
        XPO_ERR_SPLIT_OVERFLOW,
        "the splits' sum overflows int64",
    ),
    (
        "XPO_ERR_SPLIT_EXCEEDS",
        XPO_ERR_SPLIT_EXCEEDS,
        "a = sum, b = input rows",
    ),
    (
        "XPO_ERR_CHUNK_NEGATIVE",
        XPO_ERR_CHUNK_NEGATIVE,
        "a = column, b = split, c = offset",
    ),
    (
        "XPO_ERR_CHUNK_PAST_INPUT",
        XPO_ERR_CHUNK_PAST_INPUT,
        "a = column, b = split, c = offset",
    ),
    ("XPO_ERR_RECV_NEGATIVE", XPO_ERR_RECV_NEGATIVE, "a = count"),
    (
        "XPO_ERR_RECV_OVERFLOW",
        XPO_ERR_RECV_OVERFLOW,
        "received counts overflow int64",
    ),
    (
        "XPO_ERR_OUT_TOO_SMALL",
        XPO_ERR_OUT_TOO_SMALL,
        "a = rows needed, b = rows of out",
    ),
    (
        "XPO_ERR_PEER_FAILED",
        XPO_ERR_PEER_FAILED,
        "a = group rank, b = PE",
    ),
    (
        "XPO_ERR_MISMATCH",
        XPO_ERR_MISMATCH,
        "a = group rank, b = PE",
    ),
    ("XPO_ERR_TIMEOUT", XPO_ERR_TIMEOUT, "a = PE waited for"),
    (
        "XPO_ERR_DEVICE",
        XPO_ERR_DEVICE,
        "a = device library error code",
    ),
    (
        "XPO_ERR_PAD_TIMEOUT",
        XPO_ERR_PAD_TIMEOUT,
        "a = peer rank, b = channel",
    ),
    (
        "XPO_ERR_EP_EXPERT",
        XPO_ERR_EP_EXPERT,
        "ep routing: a = expert id, b = token, c = column",
    ),
    (
        "XPO_ERR_EP_OVERFLOW",
        XPO_ERR_EP_OVERFLOW,
        "ep routing: a = rank, b = rows, c = maximum",
    ),
    (
        "XPO_PAD_BARRIER",
        XPO_PAD_BARRIER,
        "symm_mem handle barrier",
    ),
    (
        "XPO_PAD_PUT_SIGNAL",
        XPO_PAD_PUT_SIGNAL,
        "symm_mem handle put_signal",
    ),
    (
        "XPO_PAD_WAIT_SIGNAL",
        XPO_PAD_WAIT_SIGNAL,
        "symm_mem handle wait_signal",
    ),
];

/// The text of `ops/device/xpushmem_ops_abi.h`.
pub fn header() -> String {
    let mut s = String::from(
        "/* xpushmem_ops_abi.h: codes and layouts shared by the op kernels and the host.\n * GENERATED from \
         ops/src/device_abi.rs (XPUSHMEM_BLESS=1 cargo test -p xpushmem-ops --lib device_abi). Do not edit. */\n\
         #ifndef XPUSHMEM_OPS_ABI_H\n#define XPUSHMEM_OPS_ABI_H\n",
    );
    for (name, value, doc) in ALL {
        s.push_str(&format!("#define {name} {value}ul /* {doc} */\n"));
    }
    s.push_str("#endif /* XPUSHMEM_OPS_ABI_H */\n");
    s
}

#[cfg(test)]
mod tests {
    #[test]
    fn header_matches_the_committed_file() {
        let path =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("device/xpushmem_ops_abi.h");
        let want = super::header();
        if std::env::var("XPUSHMEM_BLESS").is_ok_and(|v| v == "1") {
            std::fs::write(&path, &want).unwrap();
        }
        let got = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            got == want,
            "{} is stale: XPUSHMEM_BLESS=1 cargo test -p xpushmem-ops --lib device_abi",
            path.display()
        );
    }
}
