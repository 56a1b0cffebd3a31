package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/otlptranslator"
	"go.opentelemetry.io/otel/attribute"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"

	"github.com/tensorlife/tensorlife/oteltrack"
	"github.com/tensorlife/tensorlife/track"
)

// serviceName names the service in its metrics' resource.
const serviceName = "inferenceserver"

// telemetry is the server's metrics pipeline: tensorlife's instruments on
// an OpenTelemetry meter provider whose one reader is the Prometheus
// exporter, registered in a registry of the server's own. A private
// registry, not prometheus.DefaultRegisterer, keeps two servers in one
// process (tests) from colliding.
type telemetry struct {
	provider *sdkmetric.MeterProvider
	metrics  *oteltrack.Metrics
	handler  http.Handler
}

// newTelemetry registers tr's figures, with those of the pools, caches,
// devices and watcher made with it, and returns the pipeline with its
// /metrics handler.
func newTelemetry(tr *track.Tracker) (*telemetry, error) {
	registry := prometheus.NewRegistry()
	// The translation strategy is explicit so that names do not change with
	// the exporter's default: tensorlife.tensor.memory.usage (By) is scraped
	// as tensorlife_tensor_memory_usage_bytes, counters get _total.
	exporter, err := otelprom.New(otelprom.WithRegisterer(registry),
		otelprom.WithTranslationStrategy(otlptranslator.UnderscoreEscapingWithSuffixes))
	if err != nil {
		return nil, fmt.Errorf("prometheus exporter: %w", err)
	}
	// service.name becomes target_info's label, which joins these series to
	// the service's others.
	res := resource.NewSchemaless(attribute.String("service.name", serviceName))
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exporter), sdkmetric.WithResource(res))
	metrics, err := oteltrack.Register(tr, oteltrack.WithMeterProvider(provider))
	if err != nil {
		return nil, errors.Join(err, provider.Shutdown(context.Background()))
	}
	handler := promhttp.HandlerFor(registry, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
	return &telemetry{provider: provider, metrics: metrics, handler: handler}, nil
}

// shutdown unregisters the instruments and shuts the provider down; later
// scrapes answer with no tensorlife series.
func (t *telemetry) shutdown(ctx context.Context) error {
	return errors.Join(t.metrics.Stop(), t.provider.Shutdown(ctx))
}
