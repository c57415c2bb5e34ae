"""Alembic environment: runs against the connection regtriage hands over (see storage.store)."""

from alembic import context

from storage.schema import metadata

connection = context.config.attributes.get("connection")
if connection is None:  # plain `alembic` CLI use: build an engine from sqlalchemy.url
    from sqlalchemy import create_engine

    engine = create_engine(context.config.get_main_option("sqlalchemy.url"))
    with engine.begin() as conn:
        context.configure(connection=conn, target_metadata=metadata, render_as_batch=True)
        with context.begin_transaction():
            context.run_migrations()
else:
    context.configure(connection=connection, target_metadata=metadata, render_as_batch=True)
    with context.begin_transaction():
        context.run_migrations()
