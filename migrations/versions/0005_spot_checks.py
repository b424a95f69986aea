"""spot checks: answered turns drawn at random for a person to judge; the share on taught examples

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-02
"""
from alembic import op
import sqlalchemy as sa


revision = '0005'
down_revision = '0004'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('spot_checks',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('conversation_id', sa.String(length=32), nullable=False),
    sa.Column('message_id', sa.String(length=32), nullable=False),
    sa.Column('answer_message_id', sa.String(length=32), nullable=False),
    sa.Column('intent', sa.String(length=200), nullable=True),
    sa.Column('article_slug', sa.String(length=200), nullable=True),
    sa.Column('route', sa.String(length=24), nullable=True),
    sa.Column('confidence', sa.Float(), nullable=True),
    sa.Column('sample_share', sa.Float(), nullable=False),
    sa.Column('verdict', sa.String(length=16), nullable=True),
    sa.Column('correct_intent', sa.String(length=200), nullable=True),
    sa.Column('reviewer_id', sa.Integer(), nullable=True),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.Column('judged_at', sa.DateTime(), nullable=True),
    sa.ForeignKeyConstraint(['conversation_id'], ['conversations.id'], ),
    sa.ForeignKeyConstraint(['reviewer_id'], ['reviewers.id'], ),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('spot_checks', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_spot_checks_conversation_id'), ['conversation_id'], unique=False)
        batch_op.create_index('ix_spot_checks_verdict_created', ['verdict', 'created_at'], unique=False)
    with op.batch_alter_table('training_examples', schema=None) as batch_op:
        batch_op.add_column(sa.Column('sample_share', sa.Float(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('training_examples', schema=None) as batch_op:
        batch_op.drop_column('sample_share')
    with op.batch_alter_table('spot_checks', schema=None) as batch_op:
        batch_op.drop_index('ix_spot_checks_verdict_created')
        batch_op.drop_index(batch_op.f('ix_spot_checks_conversation_id'))
    op.drop_table('spot_checks')
