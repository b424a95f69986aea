"""privacy: reviewer roles, audit log, e-mail digests, verified customer refs

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-01
"""
from alembic import op
import sqlalchemy as sa


revision = '0002'
down_revision = '0001'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('reviewers', schema=None) as batch_op:
        batch_op.add_column(
            sa.Column('role', sa.String(length=16), nullable=False, server_default='reviewer')
        )
    with op.batch_alter_table('conversations', schema=None) as batch_op:
        batch_op.add_column(sa.Column('customer_ref', sa.String(length=64), nullable=True))
        batch_op.create_index(batch_op.f('ix_conversations_customer_ref'), ['customer_ref'], unique=False)
        batch_op.create_index(batch_op.f('ix_conversations_updated_at'), ['updated_at'], unique=False)

    op.create_table('pii_refs',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('conversation_id', sa.String(length=32), nullable=False),
    sa.Column('kind', sa.String(length=16), nullable=False),
    sa.Column('digest', sa.String(length=64), nullable=False),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.ForeignKeyConstraint(['conversation_id'], ['conversations.id'], ),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('pii_refs', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_pii_refs_conversation_id'), ['conversation_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_pii_refs_digest'), ['digest'], unique=False)

    op.create_table('audit_log',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('at', sa.DateTime(), nullable=False),
    sa.Column('actor_id', sa.Integer(), nullable=True),
    sa.Column('actor', sa.String(length=320), nullable=False),
    sa.Column('action', sa.String(length=48), nullable=False),
    sa.Column('target', sa.String(length=200), nullable=True),
    sa.Column('detail', sa.JSON(), nullable=True),
    sa.ForeignKeyConstraint(['actor_id'], ['reviewers.id'], ),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('audit_log', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_audit_log_at'), ['at'], unique=False)
        batch_op.create_index(batch_op.f('ix_audit_log_action'), ['action'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('audit_log', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_audit_log_action'))
        batch_op.drop_index(batch_op.f('ix_audit_log_at'))
    op.drop_table('audit_log')
    with op.batch_alter_table('pii_refs', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_pii_refs_digest'))
        batch_op.drop_index(batch_op.f('ix_pii_refs_conversation_id'))
    op.drop_table('pii_refs')
    with op.batch_alter_table('conversations', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_conversations_updated_at'))
        batch_op.drop_index(batch_op.f('ix_conversations_customer_ref'))
        batch_op.drop_column('customer_ref')
    with op.batch_alter_table('reviewers', schema=None) as batch_op:
        batch_op.drop_column('role')
