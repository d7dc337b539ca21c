"""The image encoder's gradient: XLA's convolution vs memgym's Conv3x3 (one matrix product), in and out of a loop.

memgym's ImpalaResNet (thesis §5.2.2) computes its 3×3 convolutions as one matrix product over
the nine shifted copies of the input (:class:`memgym.agents.encoders.Conv3x3`). This script
times the gradient of the encoder's loss on ``--images`` 64×64×3 images both ways, side by
side in one run:

* ``flax nn.Conv``: the same network with ``flax.linen.Conv`` (XLA's convolution), the form
  memgym used before;
* ``Conv3x3``: memgym's encoder as it is;

each once on all images in one call (``plain``) and once as ``--pieces`` gradient steps inside
a ``lax.scan`` (``in a scan``), which is how PPO takes its minibatch steps. The table gives the
median seconds of ``--repeats`` timed calls after one compiling call, and the compile time.

    python benchmarks/encoder_speed.py [--images 400] [--pieces 4] [--repeats 3] [--smoke]

``--smoke``: 4 images in 2 pieces, one timed call: every row in seconds (a check that the script
runs, not a measurement).
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from memgym.agents.encoders import ImpalaResNet
from memgym.memory.initializers import HIDDEN


class FlaxConvResNet(nn.Module):
    """ImpalaResNet with flax's nn.Conv in place of Conv3x3 (same parameters, same values)."""

    channels: tuple[int, ...] = (16, 32, 32)
    features: int = 256

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        def conv(y, channels):
            return nn.Conv(channels, (3, 3), padding="SAME", kernel_init=HIDDEN)(y)

        for channels in self.channels:
            x = nn.max_pool(conv(x, channels), (3, 3), strides=(2, 2), padding="SAME")
            for _ in range(2):
                x = x + conv(nn.relu(conv(nn.relu(x), channels)), channels)
        x = nn.relu(x).reshape(x.shape[0], -1)
        return nn.relu(nn.Dense(self.features, kernel_init=HIDDEN)(x))


def timed(function, *args, repeats: int) -> tuple[float, float]:
    """(seconds of the first, compiling call; median seconds of ``repeats`` later calls)."""
    started = time.perf_counter()
    jax.block_until_ready(function(*args))
    compile_seconds = time.perf_counter() - started
    runs = []
    for _ in range(repeats):
        started = time.perf_counter()
        jax.block_until_ready(function(*args))
        runs.append(time.perf_counter() - started)
    return compile_seconds, statistics.median(runs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=400, help="images per gradient (all pieces together)")
    parser.add_argument("--pieces", type=int, default=4, help="gradient steps of the scan (PPO's minibatches)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--smoke", action="store_true", help="4 images in 2 pieces, 1 timed call: a run of seconds")
    if parser.parse_known_args()[0].smoke:
        parser.set_defaults(images=4, pieces=2, repeats=1)
    args = parser.parse_args()
    if args.images % args.pieces:
        parser.error(f"--images ({args.images}) must be a multiple of --pieces ({args.pieces})")

    images = jnp.asarray(np.random.default_rng(0).random((args.images, 64, 64, 3), np.float32))
    pieces = images.reshape((args.pieces, -1) + images.shape[1:])
    print(f"ImpalaResNet gradient on {args.images} images of 64x64x3 ({args.pieces} pieces in the scan), "
          f"jax {jax.__version__} on {jax.default_backend()}, {platform.machine()}, {os.cpu_count()} CPUs, "
          f"load {os.getloadavg()[0]:.1f}")
    print(f"{'encoder':<16} {'form':<11} {'compile s':>10} {'run s':>8}")
    rows = {}
    for name, module in (("flax nn.Conv", FlaxConvResNet()), ("Conv3x3", ImpalaResNet())):
        params = module.init(jax.random.key(0), images[:1])

        def loss(p, x, module=module):
            return (module.apply(p, x) ** 2).mean()

        plain = jax.jit(jax.grad(loss))
        scanned = jax.jit(lambda p, xs, loss=loss: jax.lax.scan(lambda c, x: (c, jax.grad(loss)(p, x)), 0, xs)[1])
        for form, function, data in (("plain", plain, images), ("in a scan", scanned, pieces)):
            compile_seconds, run_seconds = timed(function, params, data, repeats=args.repeats)
            rows[name, form] = run_seconds
            print(f"{name:<16} {form:<11} {compile_seconds:10.2f} {run_seconds:8.2f}")
    print(f"Conv3x3 vs nn.Conv: plain {rows['flax nn.Conv', 'plain'] / rows['Conv3x3', 'plain']:.1f}x faster, "
          f"in a scan {rows['flax nn.Conv', 'in a scan'] / rows['Conv3x3', 'in a scan']:.1f}x faster")


if __name__ == "__main__":
    main()
