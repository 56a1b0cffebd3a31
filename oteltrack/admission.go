package oteltrack

import (
	"fmt"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/tensorlife/tensorlife/pool"
	"github.com/tensorlife/tensorlife/track"
)

// Attribute keys of the admission instruments.
const (
	attrAdmissionResult = "tensorlife.admission.result"
)

// admissionInstruments are the instruments of the pools' admission
// (pool.Pool.Admit): what each kind of request was answered, and the
// bytes the open admissions reserve.
type admissionInstruments struct {
	decisions, ranOut, past  metric.Int64Observable
	open, reserved, promised metric.Int64Observable
	// attrs caches the attribute sets by device, kind and result, bounded
	// as the kinds are: at most track.MaxRequestKinds+1 kinds a device.
	attrs map[admissionKey]metric.ObserveOption
}

type admissionKey struct{ device, kind, result string }

func (in *admissionInstruments) create(meter metric.Meter) ([]metric.Observable, error) {
	in.attrs = make(map[admissionKey]metric.ObserveOption)
	specs := []spec{
		{&in.decisions, counter, "tensorlife.pool.admissions", "{request}", "Requests a pool's admission answered, by device, request kind and result: admitted, or refused because the budget could not hold the request's reservation."},
		{&in.ranOut, counter, "tensorlife.pool.admission.ran_out", "{request}", "Admitted requests that ran out of memory inside their admission, by device and request kind."},
		{&in.past, counter, "tensorlife.pool.admission.past_reservation", "{request}", "Admitted requests that held more than their reservation, by device and request kind."},
		{&in.open, upDown, "tensorlife.pool.admission.open", "{request}", "Admissions open now."},
		{&in.reserved, upDown, "tensorlife.pool.admission.reserved", "By", "Bytes the open admissions reserved, drawn or not."},
		{&in.promised, upDown, "tensorlife.pool.admission.promised", "By", "Bytes the open admissions reserved and have not drawn: counted against the budget beside the bytes held from the device."},
	}
	out := make([]metric.Observable, 0, len(specs))
	for _, s := range specs {
		var err error
		switch s.kind {
		case upDown:
			*s.dst, err = meter.Int64ObservableUpDownCounter(s.name, metric.WithUnit(s.unit), metric.WithDescription(s.desc))
		default:
			*s.dst, err = meter.Int64ObservableCounter(s.name, metric.WithUnit(s.unit), metric.WithDescription(s.desc))
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", s.name, err)
		}
		out = append(out, *s.dst)
	}
	return out, nil
}

// attr returns the cached attributes of device, kind and result (kind
// and result "" for none). Called with the Metrics' lock held.
func (in *admissionInstruments) attr(k admissionKey) metric.ObserveOption {
	if opt, ok := in.attrs[k]; ok {
		return opt
	}
	kv := []attribute.KeyValue{attribute.String(attrDevice, k.device)}
	if k.kind != "" {
		kv = append(kv, attribute.String(attrRequestKind, k.kind))
	}
	if k.result != "" {
		kv = append(kv, attribute.String(attrAdmissionResult, k.result))
	}
	opt := metric.WithAttributeSet(attribute.NewSet(kv...))
	if len(in.attrs) >= maxCachedAttrs {
		clear(in.attrs)
	}
	in.attrs[k] = opt
	return opt
}

// deviceAdmissions is what the pools on one device say of admission.
type deviceAdmissions struct {
	open, reserved, promised int64
	kinds                    map[string]*pool.AdmissionKind
	any                      bool
}

// observe observes the admission figures of pools, added up by device
// and, within a device, by kind: past track.MaxRequestKinds kinds on a
// device the rest are added to track.OtherKind, so a device has at most
// that many series and one more per instrument and result. A device
// whose pools never admitted a request has none.
func (in *admissionInstruments) observe(o metric.Observer, pools []pool.Stats) {
	byDevice := make(map[string]*deviceAdmissions)
	for _, p := range pools {
		if len(p.AdmissionKinds) == 0 {
			continue
		}
		d := byDevice[p.Device]
		if d == nil {
			d = &deviceAdmissions{kinds: make(map[string]*pool.AdmissionKind)}
			byDevice[p.Device] = d
		}
		d.any = true
		d.open += p.Admissions
		d.reserved += p.Reservations
		d.promised += p.Promised
		for _, k := range p.AdmissionKinds {
			name := k.Kind
			if _, ok := d.kinds[name]; !ok && len(d.kinds) >= track.MaxRequestKinds && name != track.OtherKind {
				name = track.OtherKind
			}
			sum := d.kinds[name]
			if sum == nil {
				sum = &pool.AdmissionKind{Kind: name}
				d.kinds[name] = sum
			}
			sum.Admitted += k.Admitted
			sum.Refused += k.Refused
			sum.RanOut += k.RanOut
			sum.PastReservation += k.PastReservation
		}
	}
	for dev, d := range byDevice {
		attrs := in.attr(admissionKey{device: dev})
		o.ObserveInt64(in.open, d.open, attrs)
		o.ObserveInt64(in.reserved, d.reserved, attrs)
		o.ObserveInt64(in.promised, d.promised, attrs)
		for name, k := range d.kinds {
			o.ObserveInt64(in.decisions, k.Admitted, in.attr(admissionKey{dev, name, "admitted"}))
			o.ObserveInt64(in.decisions, k.Refused, in.attr(admissionKey{dev, name, "refused"}))
			kindAttrs := in.attr(admissionKey{dev, name, ""})
			o.ObserveInt64(in.ranOut, k.RanOut, kindAttrs)
			o.ObserveInt64(in.past, k.PastReservation, kindAttrs)
		}
	}
}
