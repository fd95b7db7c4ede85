# syntax=docker/dockerfile:1
# Multi-stage build: a static toolsd binary on a distroless base, running as non-root.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/toolsd ./cmd/toolsd \
 && CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/example-provider ./examples/provider \
 && mkdir -p /out/data

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/toolsd /usr/local/bin/toolsd
COPY --from=build /out/example-provider /usr/local/bin/example-provider
COPY --from=build --chown=nonroot:nonroot /out/data /var/lib/toolsd
USER nonroot:nonroot
EXPOSE 50151 9151
VOLUME ["/var/lib/toolsd"]
# Listening beyond loopback: configure auth (see README "Security") before exposing it.
ENTRYPOINT ["/usr/local/bin/toolsd", "-listen", "0.0.0.0:50151", "-admin-listen", "0.0.0.0:9151", "-data-dir", "/var/lib/toolsd"]
