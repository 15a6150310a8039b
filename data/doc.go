// Package data reads training datasets and feeds them to a training loop
// in batches.
//
// # Datasets
//
// A Dataset is a pair of in-memory tensors, X and Y, whose first dim
// indexes the samples. The readers validate their formats: a wrong or
// truncated file is a *FormatError naming the file and the byte offset.
//
//   - ReadMNIST, ReadMNISTDir: the IDX files of MNIST (and Fashion-MNIST,
//     EMNIST), gzipped or not. X is U8 [N, 1, 28, 28], Y is I64 [N].
//     ReadIDX and DecodeIDX read any IDX file.
//   - ReadCIFAR10, ReadCIFAR10Dir, ReadCIFAR100, ReadCIFAR100Dir: the
//     binary batches of CIFAR-10 and CIFAR-100. X is U8 [N, 3, 32, 32],
//     Y is I64 [N].
//   - ReadNPY, ReadNPZ: any (x, y) pair from .npy files or a .npz archive
//     (numpy.save, numpy.savez).
//
// docs/data.md says where to download MNIST and CIFAR. Dataset.Split
// makes a seeded train/validation split, Dataset.Subset a selection.
//
// # Loading
//
// A Loader yields batches of a dataset, epoch after epoch: seeded
// shuffling, drop-last, normalisation per channel, random crop with
// padding and horizontal flip, and prefetching on a background goroutine
// into reused buffers, so that a training step never waits for its data
// when loading is faster than the step. The batches are a function of
// the seed and the position (epoch, batch) alone, with or without
// prefetching; LoaderState holds that position for checkpoints.
package data
