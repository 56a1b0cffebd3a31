package track

// DeviceMemory is one device's memory at one moment, split by whose it is.
// Used, Free and Total are the device's own figures (its MemInfo); Reserved
// is what tensorlife's allocators hold there; Outside is the rest of Used:
// memory that tensorlife does not account for (a cgo runtime's buffers, a
// math library's workspace, on a GPU another process). PyTorch calls it
// "non-PyTorch memory".
type DeviceMemory struct {
	Device string
	// Used is Total - Free as the device reports it.
	Used, Free, Total int64
	// Reserved is the sum of Stats().Reserved over the allocators on this
	// device: those attached to the tracker and those in Sources.Pools.
	Reserved int64
	// Outside is Used - Reserved, never below 0: while an allocation is in
	// flight a pool may count bytes the device has not yet handed out.
	Outside int64
	// Err is why the device could not report its memory; the figures other
	// than Device and Reserved are then 0.
	Err error
}

// Reading is what a Sources holds at one moment, each allocator read once,
// so that every figure of one report or one metrics collection agrees
// with the others: a pool's reserved bytes count the same in its own row
// and in its device's split.
type Reading struct {
	// Pools are the Stats of Sources.Pools, in order.
	Pools []PoolStats
	// Devices are the memory of Sources.Devices, in order: each device's
	// own figures and what tensorlife holds there, the allocators attached
	// to the tracker (Attach) and the pools in Sources.Pools that are not
	// attached to it (a pool made without a tracker). Devices are matched
	// to allocators by name, so two devices of one tracker need distinct
	// names.
	Devices []DeviceMemory
}

// Read reads s's pools and devices, with tr's attached allocators; tr may
// be nil, and then only s.Pools count as tensorlife's. It reads counters
// and MemInfo only: O(devices + allocators).
func (s Sources) Read(tr *Tracker) Reading {
	r := Reading{Pools: make([]PoolStats, len(s.Pools))}
	pooled := make(map[uintptr]int, len(s.Pools)) // address -> index in s.Pools
	for i, p := range s.Pools {
		r.Pools[i] = p.Stats()
		if addr, ok := addressOf(p); ok {
			pooled[addr] = i
		}
	}
	if len(s.Devices) == 0 {
		return r
	}
	reserved := make(map[string]int64)
	counted := make(map[int]bool) // pools counted as attached allocators
	if tr != nil {
		srcs, addrs := tr.allocators.snapshot()
		for i, src := range srcs {
			var st PoolStats
			if j, ok := pooled[addrs[i]]; ok {
				st, counted[j] = r.Pools[j], true
			} else {
				st = src.Stats()
			}
			reserved[st.Device] += st.Reserved
		}
	}
	for i, st := range r.Pools {
		if !counted[i] {
			reserved[st.Device] += st.Reserved
		}
	}
	r.Devices = make([]DeviceMemory, 0, len(s.Devices))
	for _, d := range s.Devices {
		m := DeviceMemory{Device: d.Name(), Reserved: reserved[d.Name()]}
		free, total, err := d.MemInfo()
		if err != nil {
			m.Err = err
		} else {
			m.Free, m.Total, m.Used = free, total, total-free
			m.Outside = max(m.Used-m.Reserved, 0)
		}
		r.Devices = append(r.Devices, m)
	}
	return r
}
