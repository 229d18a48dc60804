"""Sixteen waiter tasks called after their publisher: the fix of
220_waiters_fill_every_core_bug_starved_publisher.py.

``per_rank`` calls ``publish_step`` first. Its notifies mark ``signal`` written (PyPTO
#1683), and each later ``wait_step`` reads ``signal``: a read-after-write edge, so no
waiter starts before its rank's publisher has ended, and the publisher never waits for
a core the waiters hold. Every waiter then finds its cell notified by the peer's
publisher, whatever cores it runs on.

racecheck expects:
    ranks 2: proved
"""

import argparse

import pypto.language as pl
import pypto.language.distributed as pld
import torch
from pypto.ir.distributed_compiled_program import DistributedConfig
from pypto.runtime import RunConfig

WAITERS = 16


@pl.program
class PublisherFirst:
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
        self.publish_step(signal)
        for cell in pl.range(WAITERS):
            self.wait_step(signal, cell)

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def exchange(self, x: pl.Tensor[[2, 1], pl.FP32]):
        signal_buf = pld.alloc_window_buffer([WAITERS, 1], dtype=pl.INT32)
        for r in pl.range(2):
            signal = pld.window(signal_buf, [WAITERS, 1], dtype=pl.INT32)
            self.per_rank(signal, device=r)


def main() -> int:
    parser = argparse.ArgumentParser(description="waiters after their publisher")
    parser.add_argument("-p", "--platform", default="a2a3sim")
    parser.add_argument("-d", "--device", default="0,1", help="comma-separated device ids")
    args = parser.parse_args()
    device_ids = [int(d) for d in args.device.split(",")]
    config = RunConfig(
        platform=args.platform,
        distributed_config=DistributedConfig(device_ids=device_ids[:2], num_sub_workers=0),
    )
    PublisherFirst.exchange(torch.zeros((2, 1)), config=config)
    print("OK")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
