package pprofexport

import (
	"runtime"

	"github.com/google/pprof/profile"
	"github.com/tensorlife/tensorlife/internal/format"
	"github.com/tensorlife/tensorlife/track"
)

// stacks turns sites into profile locations and functions. One stacks
// belongs to one profile under construction; it shares a location between
// every site whose stacks pass through the same call, and a stack between
// every group of one site, so a profile's size and cost grow with distinct
// frames and sites, not with tensors.
type stacks struct {
	keepLibrary bool
	p           *profile.Profile
	mapping     *profile.Mapping
	locations   map[locationKey]*profile.Location
	functions   map[functionKey]*profile.Function
	bySite      map[*track.Site][]*profile.Location
	physical    map[uintptr]string // function entry -> name of the function there
}

// locationKey identifies one location: a call, with the calls inlined into
// it. Frames that could not be symbolized may all have PC 0; for those
// alone the first frame's function and line are part of the key, which
// keeps the common key cheap to hash.
type locationKey struct {
	first, last uintptr
	frames      int
	function    string
	line        int
}

type functionKey struct{ name, file string }

func newStacks(p *profile.Profile, keepLibrary bool) *stacks {
	// One mapping stands for the whole binary: the executable's file name
	// and text range (see executable). It is marked symbolized, so pprof
	// uses the functions and lines written here and never symbolizes again.
	// A fixed mapping also lets pprof match the locations of two profiles
	// (-diff_base).
	m := &profile.Mapping{
		ID:              1,
		HasFunctions:    true,
		HasFilenames:    true,
		HasLineNumbers:  true,
		HasInlineFrames: true,
	}
	exe := executable()
	m.File, m.Start, m.Limit, m.Offset = exe.File, exe.Start, exe.Limit, exe.Offset
	p.Mapping = append(p.Mapping, m)
	return &stacks{
		keepLibrary: keepLibrary,
		p:           p,
		mapping:     m,
		locations:   make(map[locationKey]*profile.Location),
		functions:   make(map[functionKey]*profile.Function),
		bySite:      make(map[*track.Site][]*profile.Location),
		physical:    make(map[uintptr]string),
	}
}

// unknownFrame stands in for a stack that has no frame left to show, so its
// memory is still attributed somewhere visible.
var unknownFrame = track.Frame{Function: format.UnknownFunction}

// site returns the locations of s's stack, leaf first.
func (b *stacks) site(s *track.Site) []*profile.Location {
	if locs, ok := b.bySite[s]; ok {
		return locs
	}
	// siteFrames shows a missing site, which only a snapshot built by hand
	// can hold, as unknown rather than lose its memory.
	frames := siteFrames(s, b.keepLibrary)
	locs := b.frames(frames)
	b.bySite[s] = locs
	return locs
}

// siteFrames returns the frames of s a report shows, leaf first; never
// empty.
func siteFrames(s *track.Site, keepLibrary bool) []track.Frame {
	var frames []track.Frame
	switch {
	case s == nil:
	case keepLibrary:
		frames = s.Frames()
	default:
		frames = s.UserFrames()
	}
	// runtime/pprof drops the goroutine's bottom frame; so do we.
	if len(frames) > 0 && frames[len(frames)-1].Function == "runtime.goexit" {
		frames = frames[:len(frames)-1]
	}
	if len(frames) == 0 {
		return []track.Frame{unknownFrame}
	}
	return frames
}

// frames returns the locations of a stack of frames, leaf first, merging
// each call with the calls inlined into it.
func (b *stacks) frames(frames []track.Frame) []*profile.Location {
	if len(frames) == 0 {
		frames = []track.Frame{unknownFrame}
	}
	locs := make([]*profile.Location, 0, len(frames))
	for i := 0; i < len(frames); {
		j := i + 1
		for j < len(frames) && b.inlinedInto(frames[j-1], frames[j]) {
			j++
		}
		locs = append(locs, b.location(frames[i:j]))
		i = j
	}
	return locs
}

// inlinedInto reports whether inner was inlined into outer, the next frame
// toward the root. runtime.Callers gives every inlined call a PC of its own,
// so the test is the one runtime/pprof makes: inner is not the function
// compiled at its entry (so it was inlined) and outer shares that entry.
// Frames with one PC are one call too.
func (b *stacks) inlinedInto(inner, outer track.Frame) bool {
	if inner.PC != 0 && inner.PC == outer.PC {
		return true
	}
	if inner.Entry == 0 || inner.Entry != outer.Entry || inner.Function == outer.Function {
		return false
	}
	// Where the runtime does not know the entry, the frame is taken to be
	// compiled on its own rather than merge calls that may not belong together.
	phys := b.physicalName(inner.Entry)
	return phys != "" && phys != inner.Function
}

// physicalName returns the name of the function compiled at entry, or the
// empty string if the runtime does not know it.
func (b *stacks) physicalName(entry uintptr) string {
	name, ok := b.physical[entry]
	if !ok {
		if fn := runtime.FuncForPC(entry); fn != nil && fn.Entry() == entry {
			name = fn.Name()
		}
		b.physical[entry] = name
	}
	return name
}

// location returns the location of one call: group[0] is the innermost
// frame, the last one the function the others were inlined into.
func (b *stacks) location(group []track.Frame) *profile.Location {
	first, last := group[0], group[len(group)-1]
	key := locationKey{first: first.PC, last: last.PC, frames: len(group)}
	if first.PC == 0 {
		key.function, key.line = first.Function, first.Line
	}
	if loc, ok := b.locations[key]; ok {
		return loc
	}
	loc := &profile.Location{
		ID:      uint64(len(b.p.Location) + 1),
		Mapping: b.mapping,
		Address: uint64(first.PC),
		Line:    make([]profile.Line, len(group)),
	}
	for i, f := range group {
		loc.Line[i] = profile.Line{Function: b.function(f), Line: int64(f.Line)}
	}
	b.p.Location = append(b.p.Location, loc)
	b.locations[key] = loc
	return loc
}

// function returns the profile function of f. StartLine stays 0: the runtime
// does not export a function's first line, and pprof needs only the lines.
func (b *stacks) function(f track.Frame) *profile.Function {
	name := f.Function
	if name == "" {
		name = format.UnknownFunction
	}
	key := functionKey{name: name, file: f.File}
	if fn, ok := b.functions[key]; ok {
		return fn
	}
	fn := &profile.Function{
		ID:         uint64(len(b.p.Function) + 1),
		Name:       name,
		SystemName: name,
		Filename:   f.File,
	}
	b.p.Function = append(b.p.Function, fn)
	b.functions[key] = fn
	return fn
}
