package pprofexport

import (
	"github.com/tensorlife/tensorlife/internal/format"
	"github.com/tensorlife/tensorlife/track"
)

// The labels of a live sample. A request label (track.WithLabels) whose key
// is one of these names is written under LabelPrefix plus its key, so it
// cannot hide the tensor's own attributes.
const (
	// LabelDType is the string label holding the tensors' element type.
	LabelDType = "dtype"
	// LabelDevice is the string label holding the device name.
	LabelDevice = "device"
	// LabelKind is the string label holding what the tensors are for
	// ("tensor", "mask", "kv-cache").
	LabelKind = "kind"
	// LabelShape is the string label holding the shape, as [2 3 4].
	LabelShape = "shape"
	// LabelBytes is the numeric label holding the size of each tensor of a
	// sample, in bytes, as "bytes" does in a Go heap profile
	// (-tagfocus=bytes=1mb: selects tensors of a megabyte or more).
	LabelBytes = "bytes"
	// LabelLeaked is the numeric label counting the tensors of a sample the
	// garbage collector found without Free; absent when there are none.
	LabelLeaked = "leaked"
	// LabelPrefix renames a request label that collides with the names above.
	LabelPrefix = "label_"
)

func reservedLabel(key string) bool {
	switch key {
	case LabelDType, LabelDevice, LabelKind, LabelShape, LabelBytes, LabelLeaked:
		return true
	}
	return false
}

// sampleLabels are the label maps of a sample.
type sampleLabels struct {
	label map[string][]string
	num   map[string][]int64
	unit  map[string][]string
}

// labelKey identifies the labels of a group without rendering them: shapes
// of up to eight dimensions are compared inline.
type labelKey struct {
	dtype, device, kind string
	rank                int
	dims                [8]int
	longShape           string
	labels              track.Labels
	perTensor, leaked   int64
}

// labeler builds label maps once per distinct set of labels in a profile,
// so that groups that differ only by site share them: a profile of a
// thousand sites of one kind of tensor holds one set of maps.
type labeler struct {
	cache map[labelKey]*sampleLabels
}

func newLabeler() *labeler { return &labeler{cache: make(map[labelKey]*sampleLabels)} }

// labels returns the labels of g: its attributes, its request labels, the
// size of each of its tensors and how many of them leaked. Empty values are
// left out: the profile format cannot tell an empty string label from a
// missing one, and a value that does not survive a round trip would make two
// readings of one file differ.
func (lb *labeler) labels(g *track.Group) *sampleLabels {
	k := labelKey{dtype: g.DType, device: g.Device, kind: g.Kind, rank: len(g.Shape), labels: g.Labels, leaked: g.Leaked}
	if g.Count > 0 {
		k.perTensor = g.Bytes / g.Count
	}
	if len(g.Shape) <= len(k.dims) {
		copy(k.dims[:], g.Shape)
	} else {
		k.longShape = format.Shape(g.Shape)
	}
	if l, ok := lb.cache[k]; ok {
		return l
	}

	l := &sampleLabels{label: make(map[string][]string, 4+g.Labels.Len())}
	set := func(key, value string) {
		if value != "" {
			l.label[key] = append(l.label[key], value)
		}
	}
	set(LabelDType, g.DType)
	set(LabelDevice, g.Device)
	set(LabelKind, g.Kind)
	set(LabelShape, format.Shape(g.Shape))
	g.Labels.Range(func(key, value string) bool {
		if reservedLabel(key) {
			key = LabelPrefix + key
		}
		set(key, value)
		return true
	})
	// A zero numeric label is lost in the encoding, as an empty string is.
	if k.perTensor != 0 || k.leaked != 0 {
		l.num = make(map[string][]int64, 2)
		l.unit = make(map[string][]string, 2)
	}
	if k.perTensor != 0 {
		l.num[LabelBytes] = []int64{k.perTensor}
		l.unit[LabelBytes] = []string{"bytes"}
	}
	if k.leaked != 0 {
		l.num[LabelLeaked] = []int64{k.leaked}
		l.unit[LabelLeaked] = []string{"count"}
	}
	lb.cache[k] = l
	return l
}
