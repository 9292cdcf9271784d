// A minimal OpenTelemetry Collector distribution for the tests, written the way the
// OpenTelemetry Collector Builder (ocb) would generate it: otelcol.NewCommand with a
// factories function.
//
// Why: the tests of issue 44 send newsflow's spans over OTLP/HTTP to a real collector
// rather than a stub. The collector's OTLP receiver rejects malformed OTLP (so a bad
// traceId or a wrong field is a test failure, not a silent pass), and the file exporter
// writes what it accepted as OTLP JSON, one line per export, for the test to read.
//
// Components, and nothing else: receiver otlp (core), exporters file (contrib) and debug
// (core); no processors, extensions or connectors. Configuration comes from files
// (--config=file.yaml or a bare path) and ${env:VAR} references.
// Built and cached by scripts/otelcol.sh; tests/otelcol/config.yaml.in is an example config.
package main

import (
	"log"

	"github.com/open-telemetry/opentelemetry-collector-contrib/exporter/fileexporter"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/provider/envprovider"
	"go.opentelemetry.io/collector/confmap/provider/fileprovider"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/debugexporter"
	"go.opentelemetry.io/collector/otelcol"
	"go.opentelemetry.io/collector/receiver"
	"go.opentelemetry.io/collector/receiver/otlpreceiver"
	"go.opentelemetry.io/collector/service/telemetry/otelconftelemetry"
)

func components() (otelcol.Factories, error) {
	var err error
	f := otelcol.Factories{
		// The collector's own logs and metrics; the config turns its metrics off, so
		// that it listens on no port of its own (the default is :8888).
		Telemetry: otelconftelemetry.NewFactory(),
	}
	if f.Receivers, err = otelcol.MakeFactoryMap[receiver.Factory](otlpreceiver.NewFactory()); err != nil {
		return f, err
	}
	f.Exporters, err = otelcol.MakeFactoryMap[exporter.Factory](
		fileexporter.NewFactory(), debugexporter.NewFactory())
	return f, err
}

func main() {
	set := otelcol.CollectorSettings{
		BuildInfo: component.BuildInfo{
			Command:     "otelcol",
			Description: "newsflow's test collector (OTLP receiver; file and debug exporters)",
			Version:     "0.161.0-newsflow",
		},
		Factories: components,
		ConfigProviderSettings: otelcol.ConfigProviderSettings{
			ResolverSettings: confmap.ResolverSettings{
				ProviderFactories: []confmap.ProviderFactory{
					fileprovider.NewFactory(), envprovider.NewFactory(),
				},
				DefaultScheme: "env",
			},
		},
	}
	if err := otelcol.NewCommand(set).Execute(); err != nil {
		log.Fatalf("collector: %v", err)
	}
}
