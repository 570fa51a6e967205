# One image for every party of the marketplace (curator, owners, consumer) and the report step.
FROM python:3.11-slim
WORKDIR /app
COPY pyproject.toml README.md ./
COPY marketplace ./marketplace
COPY scenarios ./scenarios
RUN pip install --no-cache-dir --root-user-action=ignore . \
 && useradd --create-home --uid 1000 market
USER market
ENV PYTHONUNBUFFERED=1 MARKETPLACE_LOG_LEVEL=INFO
ENTRYPOINT []
CMD ["marketplace", "--help"]
