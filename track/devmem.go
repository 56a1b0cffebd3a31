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

// DeviceMemory reads, for each of s.Devices, the device's memory and what
// tensorlife holds there: the allocators attached to tr (Attach) and the
// pools in s.Pools that are not attached to it (a pool made without a
// tracker). Devices are matched to allocators by name, so two devices of
// one tracker need distinct names. tr may be nil: then only s.Pools count.
//
// It reads counters and MemInfo only: O(devices + allocators).
func (s Sources) DeviceMemory(tr *Tracker) []DeviceMemory {
	if len(s.Devices) == 0 {
		return nil
	}
	reserved := make(map[string]int64)
	seen := make(map[uintptr]bool)
	if tr != nil {
		srcs, addrs := tr.allocators.snapshot()
		for i, src := range srcs {
			seen[addrs[i]] = true
			st := src.Stats()
			reserved[st.Device] += st.Reserved
		}
	}
	for _, p := range s.Pools {
		if addr, ok := addressOf(p); ok && seen[addr] {
			continue
		}
		st := p.Stats()
		reserved[st.Device] += st.Reserved
	}
	out := make([]DeviceMemory, 0, len(s.Devices))
	for _, d := range s.Devices {
		m := DeviceMemory{Device: d.Name(), Reserved: reserved[d.Name()]}
		free, total, err := d.MemInfo()
		if err != nil {
			m.Err = err
		} else {
			m.Free, m.Total, m.Used = free, total, total-free
			m.Outside = max(m.Used-m.Reserved, 0)
		}
		out = append(out, m)
	}
	return out
}
