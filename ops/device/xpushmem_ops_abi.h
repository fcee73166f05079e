/* xpushmem_ops_abi.h: codes and layouts shared by the op kernels and the host.
 * GENERATED from ops/src/device_abi.rs (XPUSHMEM_BLESS=1 cargo test -p xpushmem-ops --lib device_abi). Do not edit. */
#ifndef XPUSHMEM_OPS_ABI_H
#define XPUSHMEM_OPS_ABI_H
#define XPO_SYNC_WORDS_PER_PE 7ul /* u64 words of the op sync region per PE */
#define XPO_STATUS_WORDS 8ul /* u64 words of a status record */
#define XPO_GROUP_SIZE 64ul /* work-items of an op kernel's work-group */
#define XPO_MODE_VDEV 1ul /* all_to_all_vdev */
#define XPO_MODE_2D 2ul /* all_to_all_vdev_2d */
#define XPO_MODE_2D_OFFSET 3ul /* all_to_all_vdev_2d_offset */
#define XPO_RMA_PUT 1ul /* nvshmem_put */
#define XPO_RMA_GET 2ul /* nvshmem_get */
#define XPO_RMA_PUT_SIGNAL 3ul /* nvshmem_put_with_signal */
#define XPO_RMA_WAIT_SIGNAL 4ul /* nvshmem_wait_for_signal */
#define XPO_DTYPE_F32 0ul /* float32 tiles */
#define XPO_DTYPE_F16 1ul /* float16 tiles */
#define XPO_DTYPE_BF16 2ul /* bfloat16 tiles */
#define XPO_SYMM_ONE_SHOT 1ul /* one_shot_all_reduce */
#define XPO_SYMM_ONE_SHOT_COPY 2ul /* one_shot_all_reduce_copy */
#define XPO_SYMM_TWO_SHOT_INPLACE 3ul /* two_shot_all_reduce_ */
#define XPO_SYMM_TWO_SHOT_OUT 4ul /* two_shot_all_reduce_out */
#define XPO_SYMM_REDUCE_SCATTER 5ul /* reduce_scatter_out */
#define XPO_WRITE32_MEMSET 1ul /* memset32_ */
#define XPO_WRITE32_STREAM 2ul /* stream_write_value32_ */
#define XPO_OK 0ul /* success */
#define XPO_ERR_HOST_REJECT 1ul /* arguments rejected on the host */
#define XPO_ERR_SPLIT_NEGATIVE 2ul /* a = index, b = value */
#define XPO_ERR_SPLIT_OVERFLOW 3ul /* the splits' sum overflows int64 */
#define XPO_ERR_SPLIT_EXCEEDS 4ul /* a = sum, b = input rows */
#define XPO_ERR_CHUNK_NEGATIVE 5ul /* a = column, b = split, c = offset */
#define XPO_ERR_CHUNK_PAST_INPUT 6ul /* a = column, b = split, c = offset */
#define XPO_ERR_RECV_NEGATIVE 7ul /* a = count */
#define XPO_ERR_RECV_OVERFLOW 8ul /* received counts overflow int64 */
#define XPO_ERR_OUT_TOO_SMALL 9ul /* a = rows needed, b = rows of out */
#define XPO_ERR_PEER_FAILED 10ul /* a = group rank, b = PE */
#define XPO_ERR_MISMATCH 11ul /* a = group rank, b = PE */
#define XPO_ERR_TIMEOUT 12ul /* a = PE waited for */
#define XPO_ERR_DEVICE 13ul /* a = device library error code */
#define XPO_ERR_PAD_TIMEOUT 14ul /* a = peer rank, b = channel */
#define XPO_ERR_EP_EXPERT 15ul /* ep routing: a = expert id, b = token, c = column */
#define XPO_ERR_EP_OVERFLOW 16ul /* ep routing: a = rank, b = rows, c = maximum */
#define XPO_PAD_BARRIER 1ul /* symm_mem handle barrier */
#define XPO_PAD_PUT_SIGNAL 2ul /* symm_mem handle put_signal */
#define XPO_PAD_WAIT_SIGNAL 3ul /* symm_mem handle wait_signal */
#endif /* XPUSHMEM_OPS_ABI_H */
