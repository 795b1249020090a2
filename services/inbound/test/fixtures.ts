/*
 * Reports in the forms their authors publish, with ENS's addresses put where the report names the
 * message's sender (a return path ENS signed) and its recipient:
 *   - RFC 3464 appendix C's DSN examples (a simple DSN after five days of timeouts, a
 *     multi-recipient DSN, a delayed DSN), with their odd corners kept: lower-case content-type
 *     headers, `Status: 5.0.0 (permanent failure)` with a comment, a folded Diagnostic-Code, a
 *     preamble-less first part;
 *   - RFC 5965 appendix B's ARF example (Feedback-Type abuse);
 *   - the shapes Postfix (taken from a real run of Debian's Postfix 3.7), Gmail (its "Delivery
 *     Status Notification (Failure)": multipart/related with an icon before the report, a
 *     multi-line 550-5.1.1 folded into Diagnostic-Code) and Microsoft 365 (an Exchange NDR with
 *     5.1.10 RESOLVER.ADR.RecipientNotFound and a text/rfc822-headers part) write, and the
 *     feedback-loop reports Yahoo's CFL (ARF with Original-Mail-From and the full original) and
 *     Microsoft's JMRP (ARF with the recipient redacted, matched through the quoted Return-Path)
 *     send. These are written from the providers' published descriptions, not captured bytes.
 * Every message uses LF line ends here; the SMTP client sends CRLF.
 */

export interface Parties {
  /** The signed return path of the delivery the report is about. */
  returnPath: string;
  /** The delivery's recipient. */
  recipient: string;
  /** Where the report is sent (the return path, or the feedback-loop address). */
  to?: string;
}

const original = (p: Parties, subject = 'This week at ACME') => `Return-Path: <${p.returnPath}>
Received: from mail.acme.example (mail.acme.example [192.0.2.25])
	by mx.example.org with ESMTPS id 4XyZ1234
	for <${p.recipient}>; Wed, 26 Nov 2026 18:00:00 +0000
From: ACME News <news@acme.example>
To: ${p.recipient}
Subject: ${subject}
Message-ID: <0190a0b0-0000-7000-8000-000000000001@acme.example>
Date: Wed, 26 Nov 2026 17:59:59 +0000
MIME-Version: 1.0
Content-Type: text/plain; charset=utf-8
X-ENS-Delivery-Id: 0190a0b0-0000-7000-8000-000000000001

Hello, here is this week's news.
`;

/**
 * RFC 3464 C.1: a failure after five days of timeouts (Action failed, Status 4.0.0): a soft bounce.
 */
export const rfc3464Simple = (p: Parties) => `Date: Thu, 7 Jul 1994 17:16:05 -0400
From: Mail Delivery Subsystem <MAILER-DAEMON@CS.UTK.EDU>
Message-Id: <199407072116.RAA14128@CS.UTK.EDU>
Subject: Returned mail: Cannot send message for 5 days
To: <${p.to ?? p.returnPath}>
MIME-Version: 1.0
Content-Type: multipart/report; report-type=delivery-status;
     boundary="RAA14128.773615765/CS.UTK.EDU"

--RAA14128.773615765/CS.UTK.EDU

The original message was received at Sat, 2 Jul 1994 17:10:28 -0400
from root@localhost

   ----- The following addresses had delivery problems -----
<${p.recipient}>  (unrecoverable error)

   ----- Transcript of session follows -----
<${p.recipient}>... Deferred: Connection timed out
                      with larry.slip.umd.edu.
Message could not be delivered for 5 days
Message will be deleted from queue

--RAA14128.773615765/CS.UTK.EDU
content-type: message/delivery-status

Reporting-MTA: dns; cs.utk.edu

Original-Recipient: rfc822;${p.recipient}
Final-Recipient: rfc822;${p.recipient}
Action: failed
Status: 4.0.0
Diagnostic-Code: smtp; 426 connection timed out
Last-Attempt-Date: Thu, 7 Jul 1994 17:15:49 -0400

--RAA14128.773615765/CS.UTK.EDU
content-type: message/rfc822

${original(p)}
--RAA14128.773615765/CS.UTK.EDU--
`;

/**
 * RFC 3464 C.2: three recipient blocks, two failed 5.0.0 (one with a comment), one delayed: a hard
 * bounce.
 */
export const rfc3464MultiRecipient = (p: Parties) => `Date: Fri, 8 Jul 1994 09:21:47 -0400
From: Mail Delivery Subsystem <MAILER-DAEMON@CS.UTK.EDU>
Subject: Returned mail: User unknown
To: <${p.to ?? p.returnPath}>
MIME-Version: 1.0
Content-Type: multipart/report; report-type=delivery-status;
     boundary="JAA13167.773673707/CS.UTK.EDU"

--JAA13167.773673707/CS.UTK.EDU
content-type: text/plain; charset=us-ascii

   ----- The following addresses had delivery problems -----
<${p.recipient}>  (unrecoverable error)
<wsnell@sdcc13.ucsd.edu>  (unrecoverable error)

--JAA13167.773673707/CS.UTK.EDU
content-type: message/delivery-status

Reporting-MTA: dns; cs.utk.edu

Original-Recipient: rfc822;${p.recipient}
Final-Recipient: rfc822;${p.recipient}
Action: failed
Status: 5.0.0 (permanent failure)
Diagnostic-Code: smtp; 550 '${p.recipient}' is not a
  registered gateway user
Remote-MTA: dns; vnet.ibm.com

Original-Recipient: rfc822;johnh@hpnjld.njd.hp.com
Final-Recipient: rfc822;johnh@hpnjld.njd.hp.com
Action: delayed
Status: 4.0.0 (hpnjld.njd.jp.com: host name lookup failure)

Original-Recipient: rfc822;wsnell@sdcc13.ucsd.edu
Final-Recipient: rfc822;wsnell@sdcc13.ucsd.edu
Action: failed
Status: 5.0.0
Diagnostic-Code: smtp; 550 user unknown
Remote-MTA: dns; sdcc13.ucsd.edu

--JAA13167.773673707/CS.UTK.EDU
content-type: message/rfc822

${original(p)}
--JAA13167.773673707/CS.UTK.EDU--
`;

/** RFC 3464 C.3: a delay warning (Action delayed, Will-Retry-Until): not a bounce. */
export const rfc3464Delayed = (p: Parties) => `Date: Thu, 7 Jul 1994 17:15:49 -0400
From: Mail Delivery Subsystem <MAILER-DAEMON@CS.UTK.EDU>
Message-Id: <199407072115.RAA14082@CS.UTK.EDU>
Subject: Warning: message delayed 2 days
To: <${p.to ?? p.returnPath}>
MIME-Version: 1.0
Content-Type: multipart/report; report-type=delivery-status;
     boundary="RAA14082.773615749/CS.UTK.EDU"

--RAA14082.773615749/CS.UTK.EDU
content-type: text/plain; charset=us-ascii

   ----- Transcript of session follows -----
<${p.recipient}>... Deferred: Connection timed out
                      with larry.slip.umd.edu.
Warning: message still undelivered after 2 days
Will keep trying until message is 5 days old

--RAA14082.773615749/CS.UTK.EDU
content-type: message/delivery-status

Reporting-MTA: dns; cs.utk.edu

Original-Recipient: rfc822;${p.recipient}
Final-Recipient: rfc822;${p.recipient}
Action: delayed
Status: 4.0.0
Diagnostic-Code: smtp; 426 connection timed out
Last-Attempt-Date: Thu, 7 Jul 1994 17:15:49 -0400
Will-Retry-Until: Sun, 10 Jul 1994 12:52:24 -0400

--RAA14082.773615749/CS.UTK.EDU
content-type: message/rfc822

${original(p)}
--RAA14082.773615749/CS.UTK.EDU--
`;

/**
 * What Debian's Postfix 3.7 writes for an unknown local user (from a real run, addresses replaced).
 */
export const postfixUnknownUser = (p: Parties) => `Received: by relay.ens-test.invalid (Postfix)
	id 70BB920C551; Thu, 26 Nov 2026 19:37:45 +0000 (UTC)
Date: Thu, 26 Nov 2026 19:37:45 +0000 (UTC)
From: Mail Delivery System <MAILER-DAEMON@relay.ens-test.invalid>
Subject: Undelivered Mail Returned to Sender
To: ${p.to ?? p.returnPath}
Auto-Submitted: auto-replied
MIME-Version: 1.0
Content-Type: multipart/report; report-type=delivery-status;
	boundary="47AB620C534.1795721865/relay.ens-test.invalid"
Content-Transfer-Encoding: 8bit
Message-Id: <20261126193745.70BB920C551@relay.ens-test.invalid>

This is a MIME-encapsulated message.

--47AB620C534.1795721865/relay.ens-test.invalid
Content-Description: Notification
Content-Type: text/plain; charset=utf-8
Content-Transfer-Encoding: 8bit

This is the mail system at host relay.ens-test.invalid.

I'm sorry to have to inform you that your message could not
be delivered to one or more recipients. It's attached below.

                   The mail system

<${p.recipient}>: unknown user: "nosuchuser"

--47AB620C534.1795721865/relay.ens-test.invalid
Content-Description: Delivery report
Content-Type: message/delivery-status

Reporting-MTA: dns; relay.ens-test.invalid
X-Postfix-Queue-ID: 47AB620C534
X-Postfix-Sender: rfc822; ${p.returnPath}
Arrival-Date: Thu, 26 Nov 2026 19:37:45 +0000 (UTC)

Final-Recipient: rfc822; ${p.recipient}
Original-Recipient: rfc822;${p.recipient}
Action: failed
Status: 5.1.1
Diagnostic-Code: X-Postfix; unknown user: "nosuchuser"

--47AB620C534.1795721865/relay.ens-test.invalid
Content-Description: Undelivered Message
Content-Type: message/rfc822
Content-Transfer-Encoding: 8bit

${original(p)}
--47AB620C534.1795721865/relay.ens-test.invalid--
`;

/**
 * Gmail's "Address not found" bounce: a related/alternative human part with an icon, then the
 * report.
 */
export const gmailNoSuchUser = (p: Parties) => `MIME-Version: 1.0
From: Mail Delivery Subsystem <mailer-daemon@googlemail.com>
To: ${p.to ?? p.returnPath}
Auto-Submitted: auto-replied
Subject: Delivery Status Notification (Failure)
References: <0190a0b0-0000-7000-8000-000000000001@acme.example>
In-Reply-To: <0190a0b0-0000-7000-8000-000000000001@acme.example>
X-Failed-Recipients: ${p.recipient}
Message-ID: <674f1a2b.050a0220.3c1d2e.abcdGMR@mx.google.com>
Date: Wed, 26 Nov 2026 10:00:01 -0800 (PST)
Content-Type: multipart/report; boundary="000000000000a1b2c3d4e5f60718"; report-type=delivery-status

--000000000000a1b2c3d4e5f60718
Content-Type: multipart/related; boundary="000000000000a1b8c3d4e5f60719"

--000000000000a1b8c3d4e5f60719
Content-Type: multipart/alternative; boundary="000000000000a1bfc3d4e5f6071a"

--000000000000a1bfc3d4e5f6071a
Content-Type: text/plain; charset="UTF-8"


** Address not found **

Your message wasn't delivered to ${p.recipient} because the address couldn't be found, or is unable to receive mail.

Learn more here: https://support.google.com/mail/?p=NoSuchUser

The response was:

The email account that you tried to reach does not exist. Please try double-checking the recipient's email address for typos or unnecessary spaces. For more information, go to https://support.google.com/mail/?p=NoSuchUser

--000000000000a1bfc3d4e5f6071a
Content-Type: text/html; charset="UTF-8"

<html><body><h2>Address not found</h2><p>Your message wasn't delivered to <a href="mailto:${p.recipient}">${p.recipient}</a>.</p><img src="cid:icon.png"></body></html>

--000000000000a1bfc3d4e5f6071a--
--000000000000a1b8c3d4e5f60719
Content-Type: image/png; name="icon.png"
Content-Disposition: attachment; filename="icon.png"
Content-Transfer-Encoding: base64
Content-ID: <icon.png>

iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==
--000000000000a1b8c3d4e5f60719--
--000000000000a1b2c3d4e5f60718
Content-Type: message/delivery-status

Reporting-MTA: dns; googlemail.com
Received-From-MTA: dns; mail.acme.example
Arrival-Date: Wed, 26 Nov 2026 10:00:00 -0800 (PST)
X-Original-Message-ID: <0190a0b0-0000-7000-8000-000000000001@acme.example>

Final-Recipient: rfc822; ${p.recipient}
Action: failed
Status: 5.1.1
Remote-MTA: dns; gmail-smtp-in.l.google.com. (2001:db8::1b, the server for the
 domain gmail.com.)
Diagnostic-Code: smtp; 550-5.1.1 The email account that you tried to reach does
 not exist. Please try 550-5.1.1 double-checking the recipient's email address
 for typos or 550-5.1.1 unnecessary spaces. For more information, go to 550 5.1.1
  https://support.google.com/mail/?p=NoSuchUser a1si1234567qkb.123 - gsmtp
Last-Attempt-Date: Wed, 26 Nov 2026 10:00:01 -0800 (PST)

--000000000000a1b2c3d4e5f60718
Content-Type: message/rfc822

${original(p)}
--000000000000a1b2c3d4e5f60718--
`;

/**
 * Microsoft 365's non-delivery report: 5.1.10, Exchange's `smtp;550` without a space, headers only.
 */
export const microsoftRecipientNotFound = (
  p: Parties,
) => `From: Microsoft Outlook <MicrosoftExchange329e71ec88ae4615bbc36ab6ce41109e@contoso.onmicrosoft.com>
To: <${p.to ?? p.returnPath}>
Date: Wed, 26 Nov 2026 18:00:03 +0000
Content-Type: multipart/report; report-type=delivery-status;
	boundary="e4cd08e8-1c5a-4a9b-9d6a-6b5b1f0b9c2e"
Content-Language: en-US
Message-ID: <7a1b2c3d-4e5f-6a7b-8c9d-0e1f2a3b4c5d@BN8PR12MB1234.namprd12.prod.outlook.com>
In-Reply-To: <0190a0b0-0000-7000-8000-000000000001@acme.example>
Subject: Undeliverable: This week at ACME
Auto-Submitted: auto-replied
X-MS-Exchange-Message-Is-Ndr:
MIME-Version: 1.0

--e4cd08e8-1c5a-4a9b-9d6a-6b5b1f0b9c2e
Content-Type: multipart/alternative; differences=Content-Type;
	boundary="6e0b7f3a-2d1c-4e5f-8a9b-0c1d2e3f4a5b"

--6e0b7f3a-2d1c-4e5f-8a9b-0c1d2e3f4a5b
Content-Type: text/plain; charset="us-ascii"
Content-Transfer-Encoding: quoted-printable

Your message to ${p.recipient} couldn't be delivered.
${p.recipient.split('@')[0]} wasn't found at ${p.recipient.split('@')[1]}.

--6e0b7f3a-2d1c-4e5f-8a9b-0c1d2e3f4a5b
Content-Type: text/html; charset="us-ascii"
Content-Transfer-Encoding: quoted-printable

<html><body><p>Your message to ${p.recipient} couldn't be delivered.</p></body></html>

--6e0b7f3a-2d1c-4e5f-8a9b-0c1d2e3f4a5b--

--e4cd08e8-1c5a-4a9b-9d6a-6b5b1f0b9c2e
Content-Type: message/delivery-status

Reporting-MTA: dns;BN8PR12MB1234.namprd12.prod.outlook.com
Received-From-MTA: dns;mail.acme.example
Arrival-Date: Wed, 26 Nov 2026 18:00:02 +0000
    
Final-Recipient: rfc822;${p.recipient}
Action: failed
Status: 5.1.10
Diagnostic-Code: smtp;550 5.1.10 RESOLVER.ADR.RecipientNotFound; Recipient ${p.recipient} not found by SMTP address lookup

--e4cd08e8-1c5a-4a9b-9d6a-6b5b1f0b9c2e
Content-Type: text/rfc822-headers

${original(p).split('\n\n')[0]}

--e4cd08e8-1c5a-4a9b-9d6a-6b5b1f0b9c2e--
`;

/**
 * RFC 5965 appendix B: the ARF example, sent to the return path (its Original-Mail-From is not
 * ENS's).
 */
export const rfc5965Abuse = (p: Parties) => `From: <abusedesk@example.com>
Date: Thu, 8 Mar 2005 17:40:36 EDT
Subject: FW: Earn money
To: <${p.to ?? p.returnPath}>
MIME-Version: 1.0
Content-Type: multipart/report; report-type=feedback-report;
     boundary="part1_13d.2e68ed54_boundary"

--part1_13d.2e68ed54_boundary
Content-Type: text/plain; charset="US-ASCII"
Content-Transfer-Encoding: 7bit

This is an email abuse report for an email message received from IP
192.0.2.1 on Thu, 8 Mar 2005 14:00:00 EDT.  For more information
about this format please see http://www.mipassoc.org/arf/.

--part1_13d.2e68ed54_boundary
Content-Type: message/feedback-report

Feedback-Type: abuse
User-Agent: SomeGenerator/1.0
Version: 1
Original-Mail-From: <somespammer@example.net>
Original-Rcpt-To: <${p.recipient}>
Arrival-Date: Thu, 8 Mar 2005 14:00:00 EDT
Reporting-MTA: dns; mail.example.com
Source-IP: 192.0.2.1
Authentication-Results: mail.example.com;
               spf=fail smtp.mail=somespammer@example.com
Reported-Domain: example.net
Reported-Uri: http://example.net/earn_money.html
Reported-Uri: mailto:${p.recipient}
Removal-Recipient: ${p.recipient}

--part1_13d.2e68ed54_boundary
Content-Type: message/rfc822
Content-Disposition: inline

From: <somespammer@example.net>
Received: from mailserver.example.net (mailserver.example.net
        [192.0.2.1]) by example.com with ESMTP id M63d4137594e46;
        Thu, 08 Mar 2005 14:00:00 -0400
To: <Undisclosed Recipients>
Subject: Earn money
MIME-Version: 1.0
Content-type: text/plain
Message-ID: 8787KJKJ3K4J3K4J3K4J3.mail@example.net
Date: Thu, 02 Sep 2004 12:31:03 -0500

Spam Spam Spam
Spam Spam Spam
Spam Spam Spam
Spam Spam Spam
--part1_13d.2e68ed54_boundary--
`;

/**
 * Yahoo's complaint feedback loop: ARF to the registered address, with Original-Mail-From and the
 * whole original.
 */
export const yahooComplaint = (
  p: Parties & { feedbackType?: string },
) => `From: Yahoo! Mail AntiSpam Feedback <feedback@arf.mail.yahoo.com>
To: ${p.to ?? p.returnPath}
Subject: FW: This week at ACME
Date: Wed, 26 Nov 2026 19:00:00 +0000
Message-ID: <arf-20261126190000-1234567890@arf.mail.yahoo.com>
MIME-Version: 1.0
Content-Type: multipart/report; report-type=feedback-report; boundary="----=Part_51234_1234567890.1795806000000"

------=Part_51234_1234567890.1795806000000
Content-Type: text/plain; charset=us-ascii
Content-Transfer-Encoding: 7bit

This is an email abuse report for an email message received from IP 192.0.2.25 on Wed, 26 Nov 2026 18:00:00 +0000.
For more information about this format please see http://www.mipassoc.org/arf/.

------=Part_51234_1234567890.1795806000000
Content-Type: message/feedback-report
Content-Transfer-Encoding: 7bit

Feedback-Type: ${p.feedbackType ?? 'abuse'}
User-Agent: Yahoo!-Mail-Feedback/2.0
Version: 0.1
Original-Mail-From: <${p.returnPath}>
Original-Rcpt-To: ${p.recipient}
Received-Date: Wed, 26 Nov 2026 18:00:00 +0000
Reported-Domain: acme.example
Authentication-Results: mta1001.mail.gq1.yahoo.com header.from=acme.example; dkim=pass header.d=acme.example

------=Part_51234_1234567890.1795806000000
Content-Type: message/rfc822
Content-Transfer-Encoding: 7bit

${original(p)}
------=Part_51234_1234567890.1795806000000--
`;

/**
 * Microsoft's JMRP in ARF: no Original-Mail-From, the recipient redacted, the original's
 * Return-Path kept.
 */
export const microsoftJmrpComplaint = (p: Parties) => `From: staff@hotmail.com
To: ${p.to ?? p.returnPath}
Subject: complaint about message from 192.0.2.25
Date: Wed, 26 Nov 2026 19:05:00 +0000
MIME-Version: 1.0
Content-Type: multipart/report; report-type=feedback-report;
	boundary="--boundary_0_b3d1c2a4-5e6f-4a7b-8c9d-0e1f2a3b4c5d"

----boundary_0_b3d1c2a4-5e6f-4a7b-8c9d-0e1f2a3b4c5d
Content-Type: text/plain; charset=us-ascii

This is an email abuse report for an email message received from IP 192.0.2.25 on Wed, 26 Nov 2026 18:00:00 +0000

----boundary_0_b3d1c2a4-5e6f-4a7b-8c9d-0e1f2a3b4c5d
Content-Type: message/feedback-report

Feedback-Type: abuse
User-Agent: Microsoft Junk Mail Reporting Program
Version: 1
Source-IP: 192.0.2.25
Arrival-Date: Wed, 26 Nov 2026 18:00:00 +0000

----boundary_0_b3d1c2a4-5e6f-4a7b-8c9d-0e1f2a3b4c5d
Content-Type: message/rfc822
Content-Disposition: inline

${original({ ...p, recipient: 'redacted@hotmail.com' }).replace(/^To: .*$/m, 'To: <redacted>')}
----boundary_0_b3d1c2a4-5e6f-4a7b-8c9d-0e1f2a3b4c5d--
`;

/** What a mail client sends when someone picks the List-Unsubscribe mailto. */
export const unsubscribeMail = (p: { from: string; to: string }) => `From: ${p.from}
To: ${p.to}
Subject: unsubscribe
Date: Wed, 26 Nov 2026 19:10:00 +0000
Message-ID: <unsub-1@example.org>
MIME-Version: 1.0
Content-Type: text/plain; charset=utf-8

unsubscribe
`;

/** A person's ordinary mail (an auto-reply, a reply to the newsletter): not a report. */
export const ordinaryMail = (p: { from: string; to: string }) => `From: ${p.from}
To: ${p.to}
Subject: Re: This week at ACME
Date: Wed, 26 Nov 2026 19:12:00 +0000
MIME-Version: 1.0
Content-Type: text/plain; charset=utf-8

Thanks, but please call me instead.
`;
