#!/usr/bin/perl -w
# Bulk-import messages into a public-inbox (same code path as public-inbox-mda: git + over + Xapian).
# usage: PI_CONFIG=... perl pi-bulk-import.pl INBOX_NAME FILE.eml...   |  ... INBOX_NAME < mboxrd
# From shared/docs/public-inbox.md section 3b.
use strict;
use PublicInbox::Config; use PublicInbox::Eml; use PublicInbox::InboxWritable;
use PublicInbox::MDA; use PublicInbox::MboxReader;
my $name = shift // die "usage: $0 INBOX_NAME [FILE.eml...] (or mboxrd on stdin)\n";
my $ibx = PublicInbox::Config->new->lookup_name($name) // die "no inbox $name\n";
$ibx->{-no_fsync} = 1;
$ibx = PublicInbox::InboxWritable->new($ibx);
my $im = $ibx->importer(0);
my ($n, $dup) = (0, 0);
my $add = sub { my ($eml) = @_;
	PublicInbox::MDA->set_list_headers($eml, $ibx);
	defined($im->add($eml)) ? $n++ : $dup++ };
if (@ARGV) { for my $f (@ARGV) { open my $fh, '<', $f or die "$f: $!"; my $s = do { local $/; <$fh> };
		$s =~ s/\A[\r\n]*From [^\r\n]*\r?\n//s; $add->(PublicInbox::Eml->new(\$s)) } }
else { PublicInbox::MboxReader->mboxrd(\*STDIN, $add) }
$im->done;
print "imported $n, duplicates skipped $dup\n";
