"""Variable-length all-to-all from the host function, with a hand-rolled "staged" flag
on a window of its own.

``pld.tensor.all_to_all_v(input, target, signal, send_counts, recv_counts)`` (PyPTO's
five-argument form, python/pypto/language/distributed/op/tensor_ops.py:986-992) takes
a ``[W]`` or ``[W, 1]`` INT32 signal in the host function, whose cell ``[p, 0]`` its
kernel synchronises on: a start barrier, the pushes (each destination's count first,
with a ``Set``), a completion barrier, and an epilogue taking both credits back.

Each rank ``Set``s its peers' ``flags[me, 0]`` once it has staged, and the consumer
waits for every peer's flag before it copies out the blocks it received and the
counts that say how many of their rows are valid. The flags are not the builtin's
cells, so the copy runs after the collective is complete on this rank (the buggy
twin, 132_host_all_to_all_v_bug_flag_on_builtin_cell.py, puts the flag on the
builtin's own cell).

racecheck expects:
    ranks 2..4: proved all_to_all
"""

import argparse

import pypto.language as pl
import pypto.language.distributed as pld
import torch
from pypto import ir
from pypto.ir import DistributedConfig

SIZE = 16
MAX_RECV = 4


def build_host_all_to_all_v_flagged(nr: int):
    total = nr * MAX_RECV
    flag = 0  # the flags' one column

    @pl.program
    class HostAllToAllVFlagged:
        @pl.function(type=pl.FunctionType.InCore)
        def stage_step(
            self,
            inp: pl.Tensor[[total, SIZE], pl.FP32],
            stage: pl.Out[pld.DistributedTensor[[total, SIZE], pl.FP32]],
            counts: pl.Out[pld.DistributedTensor[[nr, 1], pl.INT32]],
            signal: pld.DistributedTensor[[nr, 1], pl.INT32],
        ):
            stage = pl.store(pl.load(inp, [0, 0], [total, SIZE]), [0, 0], stage)
            for d in pl.range(nr):
                pl.write(counts, [d, 0], nr - d)
            me = pld.rank(pld.get_comm_ctx(signal))
            for peer in pl.range(nr):
                if peer != me:
                    pld.system.notify(  # @flag
                        signal, peer=peer, offsets=[me, flag], value=1, op=pld.NotifyOp.Set
                    )

        @pl.function(type=pl.FunctionType.Orchestration)
        def stage_orch(
            self,
            inp: pl.Tensor[[total, SIZE], pl.FP32],
            stage: pl.Out[pld.DistributedTensor[[total, SIZE], pl.FP32]],
            counts: pl.Out[pld.DistributedTensor[[nr, 1], pl.INT32]],
            signal: pld.DistributedTensor[[nr, 1], pl.INT32],
        ):
            self.stage_step(inp, stage, counts, signal)

        @pl.function(type=pl.FunctionType.InCore)
        def consume_step(
            self,
            data: pld.DistributedTensor[[total, SIZE], pl.FP32],
            recv_counts: pld.DistributedTensor[[nr, 1], pl.INT32],
            signal: pld.DistributedTensor[[nr, 1], pl.INT32],
            out: pl.Out[pl.Tensor[[total, SIZE], pl.FP32]],
            received: pl.Out[pl.Tensor[[nr, 1], pl.INT32]],
        ) -> pl.Tensor[[total, SIZE], pl.FP32]:
            me = pld.rank(pld.get_comm_ctx(signal))
            for src in pl.range(nr):
                if src != me:
                    pld.system.wait(signal, offsets=[src, flag], expected=1, cmp=pld.WaitCmp.Ge)
            for src in pl.range(nr):
                n_rows = pl.cast(pl.read(recv_counts, [src, 0]), pl.INDEX)
                block = pl.load(data, [src * MAX_RECV, 0], [MAX_RECV, SIZE])  # @consume
                out = pl.store(block, [src * MAX_RECV, 0], out)  # rows past n_rows: stale
                pl.write(received, [src, 0], n_rows)
            return out

        @pl.function(type=pl.FunctionType.Orchestration)
        def consume_orch(
            self,
            data: pld.DistributedTensor[[total, SIZE], pl.FP32],
            recv_counts: pld.DistributedTensor[[nr, 1], pl.INT32],
            signal: pld.DistributedTensor[[nr, 1], pl.INT32],
            out: pl.Out[pl.Tensor[[total, SIZE], pl.FP32]],
            received: pl.Out[pl.Tensor[[nr, 1], pl.INT32]],
        ) -> pl.Tensor[[total, SIZE], pl.FP32]:
            return self.consume_step(data, recv_counts, signal, out, received)

        @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
        def host_orch(
            self,
            inputs: pl.Tensor[[nr, total, SIZE], pl.FP32],
            outputs: pl.Out[pl.Tensor[[nr, total, SIZE], pl.FP32]],
            received: pl.Out[pl.Tensor[[nr, nr, 1], pl.INT32]],
        ) -> pl.Tensor[[nr, total, SIZE], pl.FP32]:
            input_buf = pld.alloc_window_buffer(total * SIZE * pl.FP32.get_byte())
            data_buf = pld.alloc_window_buffer(total * SIZE * pl.FP32.get_byte())
            signal_buf = pld.alloc_window_buffer(nr * pl.INT32.get_byte())
            flags_buf = pld.alloc_window_buffer(nr * pl.INT32.get_byte())
            counts_buf = pld.alloc_window_buffer(nr * pl.INT32.get_byte())
            recv_buf = pld.alloc_window_buffer(nr * pl.INT32.get_byte())
            signal = pld.window(signal_buf, [nr, 1], dtype=pl.INT32)
            flags = pld.window(flags_buf, [nr, 1], dtype=pl.INT32)
            for r in pl.range(pld.world_size()):
                stage = pld.window(input_buf, [total, SIZE], dtype=pl.FP32)
                counts = pld.window(counts_buf, [nr, 1], dtype=pl.INT32)
                self.stage_orch(inputs[r], stage, counts, flags, device=r)
            stage = pld.window(input_buf, [total, SIZE], dtype=pl.FP32)
            data = pld.window(data_buf, [total, SIZE], dtype=pl.FP32)
            counts = pld.window(counts_buf, [nr, 1], dtype=pl.INT32)
            recv = pld.window(recv_buf, [nr, 1], dtype=pl.INT32)
            data = pld.tensor.all_to_all_v(stage, data, signal, counts, recv)  # @exchange
            for r in pl.range(pld.world_size()):
                self.consume_orch(data, recv, flags, outputs[r], received[r], device=r)
            return outputs

    return HostAllToAllVFlagged


def main() -> int:
    parser = argparse.ArgumentParser(description="host-level all_to_all_v with a separate flag")
    parser.add_argument("-p", "--platform", default="a2a3sim")
    parser.add_argument("-d", "--device", default="0,1,2,3")
    args = parser.parse_args()
    device_ids = [int(d) for d in args.device.split(",")]
    nr = len(device_ids)
    compiled = ir.compile(
        build_host_all_to_all_v_flagged(nr),
        platform=args.platform,
        distributed_config=DistributedConfig(device_ids=device_ids, num_sub_workers=0),
    )
    total = nr * MAX_RECV
    inputs = torch.randn((nr, total, SIZE), dtype=torch.float32)
    outputs = torch.zeros((nr, total, SIZE), dtype=torch.float32)
    compiled(inputs, outputs, torch.zeros((nr, nr, 1), dtype=torch.int32))
    golden = inputs.reshape(nr, nr, MAX_RECV, SIZE).transpose(0, 1).reshape(nr, total, SIZE)
    print("OK" if torch.allclose(outputs, golden) else "MISMATCH")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
