// A service traced with the OpenTelemetry JavaScript SDK, for the interop
// check of test/t/034_tracing.pl: it listens on 127.0.0.1 (a
// free port, written to the file given as the first argument), continues
// the W3C trace context of every request in a SERVER span of its own,
// exports that span over OTLP/HTTP JSON to the collector given as the
// second argument (its base URL), and answers with the ids it used.
'use strict';

const http = require('http');
const fs = require('fs');
const api = require('@opentelemetry/api');
const { W3CTraceContextPropagator } = require('@opentelemetry/core');
const { BasicTracerProvider, SimpleSpanProcessor } = require('@opentelemetry/sdk-trace-base');
const { OTLPTraceExporter } = require('@opentelemetry/exporter-trace-otlp-http');
const { resourceFromAttributes } = require('@opentelemetry/resources');

const [portFile, collector] = process.argv.slice(2);
if (!portFile || !collector) {
  console.error('usage: node service.js PORT_FILE COLLECTOR_URL');
  process.exit(2);
}

const provider = new BasicTracerProvider({
  resource: resourceFromAttributes({ 'service.name': 'node-service' }),
  spanProcessors: [new SimpleSpanProcessor(new OTLPTraceExporter({ url: `${collector}/v1/traces` }))],
});
const tracer = provider.getTracer('pg-durable-interop');
const propagator = new W3CTraceContextPropagator();

const server = http.createServer((req, res) => {
  const parent = propagator.extract(api.ROOT_CONTEXT, req.headers, api.defaultTextMapGetter);
  const span = tracer.startSpan(`${req.method} ${req.url}`, { kind: api.SpanKind.SERVER }, parent);
  const ctx = span.spanContext();
  const body = JSON.stringify({
    trace_id: ctx.traceId,
    span_id: ctx.spanId,
    traceparent: req.headers.traceparent || null,
    tracestate: req.headers.tracestate || null,
  });
  span.setAttribute('http.request.method', req.method);
  span.setAttribute('http.response.status_code', 200);
  span.end();
  provider.forceFlush().catch((err) => console.error('export failed:', err)).finally(() => {
    res.writeHead(200, { 'Content-Type': 'application/json' });
    res.end(body);
  });
});

server.listen(0, '127.0.0.1', () => {
  fs.writeFileSync(`${portFile}.tmp`, `${server.address().port}\n`);
  fs.renameSync(`${portFile}.tmp`, portFile);
});

// stop with the test
process.on('SIGTERM', () => provider.shutdown().finally(() => process.exit(0)));
