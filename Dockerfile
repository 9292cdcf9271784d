# newsflow container image. Build steps are scripts/deps.sh --build (the toolchain and the job's
# libraries, without the test and benchmark tools of a developer machine) + the CMake build; the
# runtime stage installs only the shared libraries (deps.sh --runtime).
#   docker build -t newsflow .
#   docker run --rm -p 9464:9464 newsflow
FROM debian:12 AS build
WORKDIR /src
COPY scripts/deps.sh scripts/deps.sh
RUN bash scripts/deps.sh --build && rm -rf /var/lib/apt/lists/*
COPY . .
RUN cmake -S . -B build -DCMAKE_BUILD_TYPE=Release \
 && cmake --build build -j "$(nproc)" --target newsflow \
 && build/newsflow config check config/newsflow.json

FROM debian:12-slim
COPY scripts/deps.sh /usr/local/share/newsflow/deps.sh
RUN bash /usr/local/share/newsflow/deps.sh --runtime && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 10001 --home-dir /var/lib/newsflow --create-home newsflow
COPY --from=build /src/build/newsflow /usr/local/bin/newsflow
COPY --from=build /src/config/ /etc/newsflow/
COPY --from=build /src/examples/ /usr/share/newsflow/examples/
USER newsflow
WORKDIR /var/lib/newsflow
# In a container the admin server must listen beyond loopback to be scraped and probed.
# The bundled example feeds are the default sources; mount your own list and point
# NEWSFLOW_SOURCES_FILE at it (or set sources.urls in a config file).
# The topic taxonomy is compiled in (classify.taxonomy = builtin); /etc/newsflow/taxonomy.json
# is a copy to edit: mount yours and set NEWSFLOW_CLASSIFY_TAXONOMY to its path (try it first
# with `newsflow parse FEED --taxonomy FILE`).
ENV NEWSFLOW_CONFIG=/etc/newsflow/newsflow.json \
    NEWSFLOW_ADMIN_LISTEN=0.0.0.0 \
    NEWSFLOW_SOURCES_FILE=/usr/share/newsflow/examples/feeds/sources.txt
EXPOSE 9464
HEALTHCHECK --interval=10s --timeout=3s --start-period=10s \
  CMD curl -sf http://127.0.0.1:9464/healthz || exit 1
# SIGTERM drains (shutdown.timeout_ms, default 10 s): give the runtime more than that.
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/local/bin/newsflow"]
CMD ["run"]
