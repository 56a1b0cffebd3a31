// Package oomdump writes down the moment an allocation ran out of memory:
// the profile of the live tensors, the memory summary and, when the tracker
// keeps its event history, the timeline, into a directory, at most once
// per interval.
//
// An out-of-memory error says what failed; what a person needs next is
// what held the memory at that moment, and a service that handles the
// error (fails the request, sheds load, restarts) loses that moment. PyTorch
// users write this observer again and again; here it is one value:
//
//	dumper, err := oomdump.New(tracker, "/var/tmp/oom")
//	...
//	defer dumper.Close()
//	p, err := pool.New(dev, pool.Tracker(tracker), pool.Budget(budget),
//		pool.OnOutOfMemory(dumper.OutOfMemory))
//
// The summary finds the pool, its device and the watchers on the tracker.
// The pool calls OutOfMemory with every *tensor.OOMError it returns; any
// other code that meets one may call it too. The first one writes a dump;
// those that follow within Interval (DefaultInterval, a minute) are counted
// and skipped, as are those heard while a dump is still being written, so
// an OOM storm costs one dump. A dump is four files whose names share a
// prefix: the tracker's name, "oom", the time in UTC and the dump's number,
//
//	agentleak-oom-20250314T092653.120Z-1.pb.gz        the profile: go tool pprof -top
//	agentleak-oom-20250314T092653.120Z-1.summary.txt  the error, then report.WriteSummary
//	agentleak-oom-20250314T092653.120Z-1.trace.json   the timeline's trace: ui.perfetto.dev
//	agentleak-oom-20250314T092653.120Z-1.svg          the timeline's picture, with the budget line
//
// the last two only when the tracker keeps its history (track.KeepHistory).
// The directory is made if missing; each file appears complete or not at
// all.
//
// # What the failing allocation waits for
//
// OutOfMemory runs on the goroutine whose allocation failed, which waits
// for it. It copies there the tracker's counters that the default
// profile is read from (Books.CopyCounts), by site and shape, with no
// request label and no walk of the registry: O(sites × shapes) whatever
// the live set holds, about 80 bytes a site. The profile, built from that
// copy, shows the memory as it was when the allocation failed, before the
// failing request frees what it held. Everything else (the snapshot, the
// summary's figures, the timeline, symbolizing, encoding, the files)
// happens on a goroutine of the dumper's that starts for that dump and
// ends when it is written. The
// summary is read there, moments later; the error at its head holds the
// pool's figures and top sites of the moment itself. Close stops taking
// dumps and waits for the one being written; Wait waits without stopping.
//
// # Files of a dump cut short
//
// Each file is written under a temporary name (".tensorlife-tmp-" and the
// file's name) in the directory and renamed when complete. A process
// killed in the middle of a dump (SIGKILL, the kernel's OOM killer) leaves
// that temporary file, which may weigh megabytes. The writer holds an
// exclusive lock (flock) on its temporary file until the rename, and the
// system drops it when the process dies, so the lock is what tells a dead
// writer's file from a live one's: New, and every file written into the
// directory, removes the temporary files no one holds locked, at once, and
// never one that a live writer holds, in this process or another sharing
// the directory. No process id or age is guessed at. Where the system has
// no flock (Windows), nothing is removed.
//
// # Errors for bad input
//
// New is the one entry point that takes input: a nil tracker is an error
// matching track.ErrNilTracker; an empty directory, a nil option and a bad
// value (Interval below 0, OnDump(nil), Logger(nil)) match
// ErrInvalidOption. A dump that failed says why in its Dump.Err: a
// panic while writing it matches ErrPanicked; a file that cannot be
// written keeps the system's error (a path that is not a directory, a
// full disk).
//
// Every method is safe for concurrent use.
package oomdump
