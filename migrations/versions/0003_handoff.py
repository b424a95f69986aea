"""handoff: conversation states, internal notes, canned replies, the delivery outbox

Revision ID: 0003
Revises: 0001
Create Date: 2026-12-01
"""
from alembic import op
import sqlalchemy as sa


revision = '0003'
down_revision = '0002'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('conversations', schema=None) as batch_op:
        batch_op.add_column(sa.Column('assigned_to', sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column('state_changed_at', sa.DateTime(), nullable=True))
        batch_op.add_column(sa.Column('customer_email', sa.String(length=320), nullable=True))
        batch_op.create_foreign_key(
            'fk_conversations_assigned_to_reviewers', 'reviewers', ['assigned_to'], ['id']
        )
    # The old two states become the first two of the state machine.
    op.execute("UPDATE conversations SET status = 'bot' WHERE status = 'open'")
    op.execute("UPDATE conversations SET status = 'pending' WHERE status = 'pending_review'")

    op.create_table('review_notes',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('item_id', sa.Integer(), nullable=False),
    sa.Column('author_id', sa.Integer(), nullable=True),
    sa.Column('text', sa.Text(), nullable=False),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.ForeignKeyConstraint(['author_id'], ['reviewers.id'], ),
    sa.ForeignKeyConstraint(['item_id'], ['review_items.id'], ),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('review_notes', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_review_notes_item_id'), ['item_id'], unique=False)

    op.create_table('canned_replies',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('title', sa.String(length=200), nullable=False),
    sa.Column('body', sa.Text(), nullable=False),
    sa.Column('created_by', sa.Integer(), nullable=True),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.ForeignKeyConstraint(['created_by'], ['reviewers.id'], ),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('title')
    )

    op.create_table('deliveries',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('channel', sa.String(length=16), nullable=False),
    sa.Column('conversation_id', sa.String(length=32), nullable=True),
    sa.Column('target', sa.String(length=2000), nullable=False),
    sa.Column('event', sa.String(length=64), nullable=False),
    sa.Column('body', sa.Text(), nullable=False),
    sa.Column('status', sa.String(length=16), nullable=False),
    sa.Column('attempts', sa.Integer(), nullable=False),
    sa.Column('next_attempt_at', sa.DateTime(), nullable=False),
    sa.Column('locked_until', sa.DateTime(), nullable=True),
    sa.Column('last_error', sa.Text(), nullable=True),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.Column('delivered_at', sa.DateTime(), nullable=True),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('deliveries', schema=None) as batch_op:
        batch_op.create_index('ix_deliveries_status_next', ['status', 'next_attempt_at'], unique=False)
        batch_op.create_index(batch_op.f('ix_deliveries_conversation_id'), ['conversation_id'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('deliveries', schema=None) as batch_op:
        batch_op.drop_index('ix_deliveries_status_next')
        batch_op.drop_index(batch_op.f('ix_deliveries_conversation_id'))
    op.drop_table('deliveries')
    op.drop_table('canned_replies')
    with op.batch_alter_table('review_notes', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_review_notes_item_id'))
    op.drop_table('review_notes')
    op.execute("UPDATE conversations SET status = 'pending_review' WHERE status IN ('pending', 'with_person')")
    op.execute("UPDATE conversations SET status = 'open' WHERE status NOT IN ('pending_review')")
    with op.batch_alter_table('conversations', schema=None) as batch_op:
        batch_op.drop_constraint('fk_conversations_assigned_to_reviewers', type_='foreignkey')
        batch_op.drop_column('customer_email')
        batch_op.drop_column('state_changed_at')
        batch_op.drop_column('assigned_to')
