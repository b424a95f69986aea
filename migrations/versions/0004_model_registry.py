"""model registry: versions with status and history, published artifacts, shadow comparisons

Revision ID: 0004
Revises: 0001
Create Date: 2026-12-01
"""
from alembic import op
import sqlalchemy as sa


revision = '0004'
down_revision = '0003'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('model_versions',
    sa.Column('version', sa.String(length=100), nullable=False),
    sa.Column('status', sa.String(length=16), nullable=False),
    sa.Column('traffic_share', sa.Float(), nullable=False),
    sa.Column('manifest', sa.JSON(), nullable=False),
    sa.Column('digest', sa.String(length=64), nullable=True),
    sa.Column('size_bytes', sa.Integer(), nullable=False),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.Column('status_changed_at', sa.DateTime(), nullable=False),
    sa.PrimaryKeyConstraint('version')
    )
    op.create_table('model_events',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('version', sa.String(length=100), nullable=False),
    sa.Column('from_status', sa.String(length=16), nullable=True),
    sa.Column('to_status', sa.String(length=16), nullable=False),
    sa.Column('traffic_share', sa.Float(), nullable=False),
    sa.Column('reason', sa.Text(), nullable=False),
    sa.Column('actor', sa.String(length=200), nullable=False),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.ForeignKeyConstraint(['version'], ['model_versions.version'], ),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('model_events', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_model_events_version'), ['version'], unique=False)

    op.create_table('model_artifacts',
    sa.Column('version', sa.String(length=100), nullable=False),
    sa.Column('seq', sa.Integer(), nullable=False),
    sa.Column('data', sa.LargeBinary(), nullable=False),
    sa.ForeignKeyConstraint(['version'], ['model_versions.version'], ),
    sa.PrimaryKeyConstraint('version', 'seq')
    )
    op.create_table('shadow_comparisons',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('version', sa.String(length=100), nullable=False),
    sa.Column('active_version', sa.String(length=100), nullable=True),
    sa.Column('conversation_id', sa.String(length=32), nullable=True),
    sa.Column('query', sa.Text(), nullable=False),
    sa.Column('active_intent', sa.String(length=200), nullable=True),
    sa.Column('shadow_intent', sa.String(length=200), nullable=True),
    sa.Column('active_slug', sa.String(length=200), nullable=True),
    sa.Column('shadow_slug', sa.String(length=200), nullable=True),
    sa.Column('active_route', sa.String(length=24), nullable=True),
    sa.Column('shadow_route', sa.String(length=24), nullable=True),
    sa.Column('active_confidence', sa.Float(), nullable=True),
    sa.Column('shadow_confidence', sa.Float(), nullable=True),
    sa.Column('active_escalated', sa.Boolean(), nullable=False),
    sa.Column('shadow_escalated', sa.Boolean(), nullable=False),
    sa.Column('kl', sa.Float(), nullable=True),
    sa.Column('disagrees', sa.Boolean(), nullable=False),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('shadow_comparisons', schema=None) as batch_op:
        batch_op.create_index('ix_shadow_comparisons_version_created', ['version', 'created_at'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('shadow_comparisons', schema=None) as batch_op:
        batch_op.drop_index('ix_shadow_comparisons_version_created')
    op.drop_table('shadow_comparisons')
    op.drop_table('model_artifacts')
    with op.batch_alter_table('model_events', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_model_events_version'))
    op.drop_table('model_events')
    op.drop_table('model_versions')
