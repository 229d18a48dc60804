"""Sixteen waiter tasks that fill every core of a rank before its publisher can run.

Each rank's ``per_rank`` calls ``wait_step`` sixteen times, one task per signal cell,
then ``publish_step``, which notifies all sixteen cells of its peer. The waiters only
read ``signal``; the publisher writes it (a notify target counts as written since
PyPTO #1683), but a write after a read gives no edge (write-after-read is not
tracked): the publisher may start before, after or among the waiters. A blocking wait
keeps its core while it spins (PyPTO's tests/st/distributed/test_l3_deferred_completion.py:
"occupies every AIV core before the publisher can run and deadlocks"), and the A2/A3
simulator has 16 AIV cores, racecheck's default ``--cores``: when the sixteen waiters
of both ranks take every core first, no publisher ever starts. This is the hang
pypto-lib fixed three times in EP8 prefill (#893, #953, #982). The twin,
221_waiters_after_their_publisher.py, calls the publisher first.

racecheck expects:
    ranks 2: bug deadlock at @wait ranks 0 1
"""

import argparse

import pypto.language as pl
import pypto.language.distributed as pld
import torch
from pypto.ir.distributed_compiled_program import DistributedConfig
from pypto.runtime import RunConfig

WAITERS = 16


@pl.program
class StarvedPublisher:
    @pl.function(type=pl.FunctionType.InCore)
    def wait_step(
        self, signal: pld.DistributedTensor[[WAITERS, 1], pl.INT32], cell: pl.Scalar[pl.INT32]
    ):
        pld.system.wait(signal, offsets=[cell, 0], expected=1, cmp=pld.WaitCmp.Ge)  # @wait

    @pl.function(type=pl.FunctionType.InCore)
    def publish_step(self, signal: pld.DistributedTensor[[WAITERS, 1], pl.INT32]):
        ctx = pld.get_comm_ctx(signal)
        peer = 1 - pld.rank(ctx)
        for cell in pl.range(WAITERS):
            pld.system.notify(
                signal, peer=peer, offsets=[cell, 0], value=1, op=pld.NotifyOp.AtomicAdd
            )

    @pl.function(type=pl.FunctionType.Orchestration)
    def per_rank(self, signal: pld.DistributedTensor[[WAITERS, 1], pl.INT32]):
        for cell in pl.range(WAITERS):
            self.wait_step(signal, cell)
        self.publish_step(signal)

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def exchange(self, x: pl.Tensor[[2, 1], pl.FP32]):
        signal_buf = pld.alloc_window_buffer([WAITERS, 1], dtype=pl.INT32)
        for r in pl.range(2):
            signal = pld.window(signal_buf, [WAITERS, 1], dtype=pl.INT32)
            self.per_rank(signal, device=r)


def main() -> int:
    parser = argparse.ArgumentParser(description="waiters that fill every core")
    parser.add_argument("-p", "--platform", default="a2a3sim")
    parser.add_argument("-d", "--device", default="0,1", help="comma-separated device ids")
    args = parser.parse_args()
    device_ids = [int(d) for d in args.device.split(",")]
    config = RunConfig(
        platform=args.platform,
        distributed_config=DistributedConfig(device_ids=device_ids[:2], num_sub_workers=0),
    )
    StarvedPublisher.exchange(torch.zeros((2, 1)), config=config)
    print("OK")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
