"""Replies on the lists: the bot's threaded reply to a regression report.

``regtriage reply ID`` (bot/cli/reply.py) runs :func:`bot.reply.run.run_reply`; the pieces,
one module each, are usable on their own:

* :mod:`bot.reply.settings` -- ``[mail]`` as :class:`MailSettings`; the SMTP password.
* :mod:`bot.reply.answered` -- the headers of the answered message (:class:`Answered`).
* :mod:`bot.reply.addresses` -- pure: the recipients policy, list detection, and
  :func:`check_recipients` (allow-listed lists, recipient count) that ``--send`` applies.
* :mod:`bot.reply.compose` -- pure: tracker entry + headers of the answered message + settings
  -> :class:`Composed` (an ``email.message.EmailMessage`` under ``email.policy.SMTP`` plus the
  recipients kept and dropped, and notes).
* :mod:`bot.reply.send` -- dry run: :func:`write_outbox` into the ``outbox`` maildir;
  :func:`send_message` over SMTP (stdlib smtplib): STARTTLS or implicit TLS, AUTH PLAIN/LOGIN.
* :mod:`bot.reply.run` -- choosing the answered message, and :func:`run_reply`.
* the ``replies`` table (storage/reply_schema.py, its queries in storage/replies.py): every
  draft, send, refusal and failure with its reason; the event key makes a sent reply unique;
  rate limits count sent rows.

The reply
---------
* ``Subject: Re: <subject of the answered message>`` -- leading reply prefixes (``Re:``,
  ``RE:``, ``Aw:``, ``Re[2]:`` ...) are folded into one ``Re:``.
* It answers the report message by default (``answer="report"``): a status reply belongs
  under the report, and ``#regzbot ^introduced: ...`` then points regzbot at the report
  (``^`` = the parent mail).  ``answer="latest"`` answers the newest stored message of the
  report's thread that is not the bot's own (no ``X-Regtriage-Record``, not
  ``Auto-Submitted``); the regzbot line then names the report by its lore URL.  A Message-ID
  answers that message, which must be in the report's thread or related to the record.
* ``In-Reply-To``: the answered message; ``References``: its References + its Message-ID,
  at most :data:`MAX_REFERENCES` ids (the thread root and the newest ones).
* Recipients: From of the answered message -> To; of its To + Cc only the mailing lists -> Cc
  (``[mail] reply_to = "author+list"``, the default; ``"all"``: every address, reply-all).
  Addresses are compared
  case-insensitively; the bot's own addresses and ``[mail] never_cc`` are removed; list
  addresses not on ``[mail] allowed_lists`` are DROPPED (not refused) and the reply says so
  in its notes -- a reply still reaches the people and the allowed lists.  ``--send`` refuses
  when no allowed list is left among the recipients.
* Body: plain text only (no HTML part), ``templates/reply.txt.j2`` (which includes
  ``entry.txt.j2``), every line wrapped at 72 columns except ``#regzbot`` command lines (regzbot
  reads one line per command) and single tokens longer than that (URLs).  ``Content-Type:
  text/plain; charset=utf-8``, ``Content-Transfer-Encoding: 8bit`` (quoted-printable when a line
  would exceed SMTP's 998 octets; re-encoded as quoted-printable when the server lacks
  8BITMIME).
* Headers: Date, Message-ID under the bot's domain, From, MIME-Version, ``Auto-Submitted:
  auto-generated``, ``X-Regtriage-Record: ID``.  Every mail-derived string placed in a header
  is cleaned of CR/LF and control characters first (and ``email.policy.SMTP`` refuses line
  breaks in header values anyway); addresses must be plain ASCII ``local@domain``.

Never the same reply twice: the event key is ``<record id>:<event kind>:<hash of the facts>``
(event kind: the record's status unless given).  A sent (or being sent) event is never sent
again; a second dry run of the same event says where the draft is unless ``force``.

Secrets: the SMTP password comes only from ``$REGTRIAGE_SMTP_PASSWORD`` or ``[mail]
password_file``; it is read when sending, kept out of every dataclass, log line, message and
database row (SMTP error texts are scrubbed of it), and never sent without TLS except to a
loopback relay.
"""
