# syntax=docker/dockerfile:1
# linknode in a container: a static binary on an empty image, run as a
# non-root user, its data in the /data volume, healthy when /readyz is.
#   docker build -t linkraft .
#   docker run -p 8080:8080 -v linkraft-data:/data linkraft
# The admin listener stays inside the container (127.0.0.1:8081): run the
# operator commands there, e.g. docker exec CONTAINER /linknode status.

FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
COPY third_party ./third_party
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/linknode ./cmd/linknode \
 && mkdir -p /out/data /out/keys

FROM scratch
COPY --from=build /out/linknode /linknode
COPY --from=build --chown=65532:65532 /out/data /data
COPY --from=build --chown=65532:65532 /out/keys /keys
USER 65532:65532
VOLUME /data
# HTTP, admin (inside only), peer, gossip (TCP and UDP).
EXPOSE 8080 7000 7946 7946/udp
HEALTHCHECK --interval=10s --timeout=5s --start-period=60s --retries=3 CMD ["/linknode", "probe", "-url", "http://127.0.0.1:8080/readyz"]
ENTRYPOINT ["/linknode"]
CMD ["-data-dir", "/data", "-http-addr", ":8080", "-admin-addr", "127.0.0.1:8081"]
