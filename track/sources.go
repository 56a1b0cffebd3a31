package track

// The interfaces in this file let metrics and reports read figures from
// packages above track (pool, mask) without track importing them: a
// *pool.Pool is a PoolSource, a *mask.Cache a CacheSource, and any
// tensor.Device a DeviceSource.

// PoolStats are a caching allocator's figures, as metrics and the memory
// summary read them.
type PoolStats struct {
	Device string // device name
	// Reserved bytes are held from the device; Active are in blocks handed
	// out; Cached are free blocks kept for reuse (Reserved = Active+Cached).
	Reserved, Active, Cached int64
	PeakReserved, PeakActive int64
	// Limit is the memory budget in bytes; 0 means none.
	Limit                     int64
	DeviceAllocs, DeviceFrees int64
	Hits, Misses, Evictions   int64
	OOMs                      int64
}

// PoolSource is anything that reports PoolStats (a *pool.Pool).
type PoolSource interface {
	PoolStats() PoolStats
}

// CacheStats are a bounded cache's figures (a *mask.Cache).
type CacheStats struct {
	Name                    string
	Bytes, Entries          int64
	BudgetBytes, MaxEntries int64
	Hits, Misses, Evictions int64
}

// CacheSource is anything that reports CacheStats.
type CacheSource interface {
	CacheStats() CacheStats
}

// DeviceSource is a device whose memory can be read: every tensor.Device.
type DeviceSource interface {
	Name() string
	MemInfo() (free, total int64, err error)
}
